// Command image packs one static binary into a single-layer container image
// without Docker or a registry, and writes it as a docker-archive tarball
// (for `docker load`, `kind load image-archive` and
// `ctr -n k8s.io images import`) and, if asked, as an OCI image layout.
//
// The layer holds the binary, an /etc/passwd and /etc/group naming the
// non-root user the image runs as, and an empty /tmp; there is no shell. File
// times and the config's creation time are fixed (SOURCE_DATE_EPOCH, or the
// Unix epoch), so the same binary always gives the same image digest.
//
//	go run ./hack/image -binary bin/burstcache -path /usr/local/bin/burstcache \
//	    -tag burstcache:v0.1.0 -tag burstcache:dev -out bin/burstcache-image.tar
package main
