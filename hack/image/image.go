package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Spec says what goes into an image.
type Spec struct {
	// Binary is the file on this machine to pack; it must be static, since
	// the image holds no libraries.
	Binary string
	// Path is where the binary lives in the image; it is the entrypoint.
	Path string
	// UID is the user and group the image runs as; it must not be 0.
	UID int
	// UserName names UID in the image's /etc/passwd and /etc/group.
	UserName string
	// Version labels the image (org.opencontainers.image.version).
	Version string
	// Created stamps the files of the layer and the config.
	Created time.Time
}

// Build makes the single-layer image that spec describes.
func Build(spec Spec) (v1.Image, error) {
	if spec.UID <= 0 {
		return nil, fmt.Errorf("image user %d: must be a non-root uid", spec.UID)
	}
	bin, err := os.ReadFile(spec.Binary)
	if err != nil {
		return nil, fmt.Errorf("reading the binary: %w", err)
	}
	layerTar, err := layerContents(spec, bin)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.DockerLayer))
	if err != nil {
		return nil, fmt.Errorf("making the layer: %w", err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, fmt.Errorf("adding the layer: %w", err)
	}
	return withConfig(img, spec)
}

func withConfig(img v1.Image, spec Spec) (v1.Image, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading the empty config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = runtime.GOARCH, "linux"
	if arch := os.Getenv("GOARCH"); arch != "" {
		cf.Architecture = arch
	}
	cf.Created = v1.Time{Time: spec.Created}
	cf.Config.User = fmt.Sprintf("%d:%d", spec.UID, spec.UID)
	cf.Config.Entrypoint = []string{spec.Path}
	cf.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	cf.Config.WorkingDir = "/"
	cf.Config.Labels = map[string]string{
		"org.opencontainers.image.title":   path.Base(spec.Path),
		"org.opencontainers.image.version": spec.Version,
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("setting the config: %w", err)
	}
	return mutate.CreatedAt(img, v1.Time{Time: spec.Created})
}

// layerContents is the tar of the one layer: parent directories, the
// binary, passwd and group files naming the user, and a world-writable /tmp.
func layerContents(spec Spec, bin []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:/home/%s:/sbin/nologin\n",
		spec.UserName, spec.UID, spec.UID, spec.UserName, spec.UserName)
	group := fmt.Sprintf("root:x:0:\n%s:x:%d:\n", spec.UserName, spec.UID)
	entries := []tarEntry{{name: "etc/", mode: 0o755}, {name: "tmp/", mode: 0o1777},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: fmt.Sprintf("home/%s/", spec.UserName), mode: 0o755, uid: spec.UID}}
	for _, d := range parents(spec.Path) {
		entries = append(entries, tarEntry{name: d + "/", mode: 0o755})
	}
	entries = append(entries, tarEntry{name: spec.Path[1:], mode: 0o755, data: bin})
	for _, e := range entries {
		if err := e.write(tw, spec.Created); err != nil {
			return nil, fmt.Errorf("writing %s to the layer: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("closing the layer: %w", err)
	}
	return buf.Bytes(), nil
}

// parents lists the directories above p, outermost first, without the
// leading slash and without /etc and /tmp (written anyway).
func parents(p string) []string {
	var dirs []string
	for d := path.Dir(p); d != "/" && d != "."; d = path.Dir(d) {
		if d != "/etc" && d != "/tmp" {
			dirs = append([]string{d[1:]}, dirs...)
		}
	}
	return dirs
}

type tarEntry struct {
	name string
	mode int64
	uid  int
	data []byte
}

func (e tarEntry) write(tw *tar.Writer, mtime time.Time) error {
	h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.uid, ModTime: mtime, Format: tar.FormatPAX}
	h.Typeflag = tar.TypeReg
	h.Size = int64(len(e.data))
	if e.name[len(e.name)-1] == '/' {
		h.Typeflag, h.Size = tar.TypeDir, 0
	}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	_, err := tw.Write(e.data)
	return err
}

// WriteArchive writes img under every tag as one docker-archive tarball.
func WriteArchive(file string, img v1.Image, tags []string) error {
	refs := make(map[name.Reference]v1.Image, len(tags))
	for _, t := range tags {
		ref, err := name.NewTag(t)
		if err != nil {
			return fmt.Errorf("parsing tag %q: %w", t, err)
		}
		refs[ref] = img
	}
	if err := tarball.MultiRefWriteToFile(file, refs); err != nil {
		return fmt.Errorf("writing %s: %w", file, err)
	}
	return nil
}

// WriteLayout writes img into an OCI image layout at dir, replacing what
// was there, with one index entry per tag.
func WriteLayout(dir string, img v1.Image, tags []string) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("clearing %s: %w", dir, err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("creating the layout %s: %w", dir, err)
	}
	for _, t := range tags {
		ann := map[string]string{"org.opencontainers.image.ref.name": t}
		if err := p.AppendImage(img, layout.WithAnnotations(ann)); err != nil {
			return fmt.Errorf("adding %s to the layout: %w", t, err)
		}
	}
	return nil
}
