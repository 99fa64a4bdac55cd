package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// tagList collects repeated -tag flags.
type tagList []string

func (t *tagList) String() string     { return strings.Join(*t, ",") }
func (t *tagList) Set(v string) error { *t = append(*t, v); return nil }

func main() {
	var spec Spec
	var tags tagList
	var out, ociDir string
	flag.StringVar(&spec.Binary, "binary", "", "static binary to pack (required)")
	flag.StringVar(&spec.Path, "path", "/usr/local/bin/burstcache", "where the binary lives in the image; it is the entrypoint")
	flag.IntVar(&spec.UID, "uid", 65532, "user and group the image runs as")
	flag.StringVar(&spec.UserName, "user-name", "nonroot", "name of that user in /etc/passwd")
	flag.StringVar(&spec.Version, "version", "", "value of the org.opencontainers.image.version label")
	flag.Var(&tags, "tag", "image reference, repeatable (for example burstcache:dev)")
	flag.StringVar(&out, "out", "", "docker-archive tarball to write (required)")
	flag.StringVar(&ociDir, "oci", "", "OCI image layout directory to write as well (optional)")
	flag.Parse()
	spec.Created = sourceDate()
	if err := run(spec, tags, out, ociDir); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(spec Spec, tags []string, out, ociDir string) error {
	if spec.Binary == "" || out == "" || len(tags) == 0 {
		return fmt.Errorf("-binary, -out and at least one -tag are required")
	}
	img, err := Build(spec)
	if err != nil {
		return err
	}
	if err := WriteArchive(out, img, tags); err != nil {
		return err
	}
	if ociDir != "" {
		return WriteLayout(ociDir, img, tags)
	}
	return nil
}

// sourceDate is the time stamped on files and the config: SOURCE_DATE_EPOCH
// when set (reproducible-builds.org), else the Unix epoch.
func sourceDate() time.Time {
	if s, err := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64); err == nil {
		return time.Unix(s, 0).UTC()
	}
	return time.Unix(0, 0).UTC()
}
