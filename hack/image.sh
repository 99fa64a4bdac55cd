#!/usr/bin/env bash
# Builds the burstcache image without Docker or a registry: a static
# bin/burstcache packed by hack/image into one layer, written as a
# docker-archive tarball and an OCI layout, tagged burstcache:VERSION and
# burstcache:dev; `pause` packs the local cluster's sandbox image (hack/pause)
# as burstcache-pause:dev instead, `all` both. Prints the tarballs it wrote.
#
#   hack/image.sh [burstcache|pause|all]
#   ctr -n k8s.io images import bin/images/burstcache.tar   (or docker load -i,
#   kind load image-archive)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
VERSION="${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)}"
COMMIT="${COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}"
out="$root/bin/images"
mkdir -p "$out"

what="${1:-burstcache}"
case "$what" in burstcache | pause | all) ;; *) echo "usage: hack/image.sh [burstcache|pause|all]" >&2; exit 2 ;; esac
export CGO_ENABLED=0
go build -o bin/image-packer ./hack/image

if [ "$what" != pause ]; then
	go build -trimpath -ldflags "-s -w -X main.version=$VERSION -X main.commit=$COMMIT" -o bin/burstcache ./cmd/burstcache
	# Image tags allow [A-Za-z0-9_.-] only; git describe may give a "+".
	tag="${VERSION//[^A-Za-z0-9_.-]/-}"
	bin/image-packer -binary bin/burstcache -path /usr/local/bin/burstcache -version "$VERSION" \
		-tag "burstcache:$tag" -tag burstcache:dev -out "$out/burstcache.tar" -oci "$out/burstcache-oci"
	echo "$out/burstcache.tar"
fi
if [ "$what" != burstcache ]; then
	go build -trimpath -ldflags "-s -w" -o bin/pause ./hack/pause
	bin/image-packer -binary bin/pause -path /pause -uid 65535 -user-name pause -version "$VERSION" \
		-tag burstcache-pause:dev -out "$out/pause.tar"
	echo "$out/pause.tar"
fi
