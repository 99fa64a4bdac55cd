package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// testBinary is the file packed by the tests: the real burstcache binary
// when BURSTCACHE_BIN names one, else a few bytes standing in for it (the
// tool never runs what it packs).
func testBinary(t *testing.T) string {
	if bin := os.Getenv("BURSTCACHE_BIN"); bin != "" {
		return bin
	}
	p := filepath.Join(t.TempDir(), "burstcache")
	if err := os.WriteFile(p, []byte("\x7fELF not really a binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func testSpec(t *testing.T) Spec {
	return Spec{Binary: testBinary(t), Path: "/usr/local/bin/burstcache", UID: 65532,
		UserName: "nonroot", Version: "v1.2.3", Created: time.Unix(1700000000, 0).UTC()}
}

func TestArchiveHoldsTheBinaryAsNonRootEntrypoint(t *testing.T) {
	spec := testSpec(t)
	tags := []string{"burstcache:v1.2.3", "burstcache:dev"}
	file := filepath.Join(t.TempDir(), "image.tar")
	img, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteArchive(file, img, tags); err != nil {
		t.Fatal(err)
	}
	// docker load and ctr import give the image every tag, in any order.
	if got := archiveRepoTags(t, file); !cmp.Equal(got, tags, cmpopts.SortSlices(func(a, b string) bool { return a < b })) {
		t.Errorf("manifest.json RepoTags = %v, want %v in any order", got, tags)
	}
	for _, tag := range tags {
		ref, err := name.NewTag(tag)
		if err != nil {
			t.Fatal(err)
		}
		loaded, err := tarball.Image(func() (io.ReadCloser, error) { return os.Open(file) }, &ref)
		if err != nil {
			t.Fatalf("loading %s: %v", tag, err)
		}
		checkImage(t, loaded, spec)
	}
}

// archiveRepoTags reads the tags that docker load and ctr import will give
// the image, from the archive's manifest.json.
func archiveRepoTags(t *testing.T, file string) []string {
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("no manifest.json in %s: %v", file, err)
		}
		if h.Name != "manifest.json" {
			continue
		}
		var m []struct{ RepoTags []string }
		if err := json.NewDecoder(tr).Decode(&m); err != nil {
			t.Fatal(err)
		}
		if len(m) != 1 {
			t.Fatalf("manifest.json has %d images, want 1", len(m))
		}
		return m[0].RepoTags
	}
}

func checkImage(t *testing.T, img v1.Image, spec Spec) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{spec.Path}, cf.Config.Entrypoint); diff != "" {
		t.Errorf("entrypoint (-want +got):\n%s", diff)
	}
	if cf.Config.User != "65532:65532" || cf.OS != "linux" || cf.Config.Labels["org.opencontainers.image.version"] != "v1.2.3" {
		t.Errorf("config user %q os %q labels %v", cf.Config.User, cf.OS, cf.Config.Labels)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers = %d (%v), want 1", len(layers), err)
	}
	files := layerFiles(t, layers[0])
	want, err := os.ReadFile(spec.Binary)
	if err != nil {
		t.Fatal(err)
	}
	bin, ok := files["usr/local/bin/burstcache"]
	if !ok || !bytes.Equal(bin.data, want) || bin.mode != 0o755 {
		t.Errorf("layer binary: present %v, same bytes %v, mode %o", ok, bytes.Equal(bin.data, want), bin.mode)
	}
	if !bytes.Contains(files["etc/passwd"].data, []byte("nonroot:x:65532:65532:")) {
		t.Errorf("etc/passwd does not name uid 65532: %q", files["etc/passwd"].data)
	}
	for _, shell := range []string{"bin/sh", "bin/bash", "bin/busybox"} {
		if _, ok := files[shell]; ok {
			t.Errorf("the image holds a shell at /%s", shell)
		}
	}
}

type layerFile struct {
	mode int64
	data []byte
}

func layerFiles(t *testing.T, l v1.Layer) map[string]layerFile {
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]layerFile{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = layerFile{mode: h.Mode, data: data}
	}
}

func TestLayoutIndexesEveryTag(t *testing.T) {
	spec := testSpec(t)
	img, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "oci")
	tags := []string{"burstcache:v1.2.3", "burstcache:dev"}
	if err := WriteLayout(dir, img, tags); err != nil {
		t.Fatal(err)
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range im.Manifests {
		got = append(got, d.Annotations["org.opencontainers.image.ref.name"])
		loaded, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		checkImage(t, loaded, spec)
	}
	if diff := cmp.Diff(tags, got); diff != "" {
		t.Errorf("layout ref names (-want +got):\n%s", diff)
	}
}

func TestBuildIsReproducibleAndRefusesRoot(t *testing.T) {
	spec := testSpec(t)
	digest := func(s Spec) v1.Hash {
		img, err := Build(s)
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if a, b := digest(spec), digest(spec); a != b {
		t.Errorf("two builds of the same binary differ: %s and %s", a, b)
	}
	spec.UID = 0
	if _, err := Build(spec); err == nil {
		t.Error("Build accepted uid 0")
	}
}
