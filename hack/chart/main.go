package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

func main() {
	chart := flag.String("chart", "charts/burstcache", "chart directory to write into")
	config := flag.String("config", "config", "config directory holding the files the chart copies")
	flag.Parse()
	if err := run(os.Stdin, *chart, *config); err != nil {
		fmt.Fprintln(os.Stderr, "chart:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, chart, config string) error {
	raw, err := io.ReadAll(in)
	if err != nil {
		return fmt.Errorf("reading the kustomize output: %w", err)
	}
	files, err := generate(raw)
	if err != nil {
		return err
	}
	values, err := os.ReadFile(filepath.Join(chart, "values.yaml"))
	if err != nil {
		return fmt.Errorf("reading values.yaml: %w", err)
	}
	readme, err := renderReadme(values)
	if err != nil {
		return err
	}
	files["README.md"] = readme
	if err := copyFiles(config, files); err != nil {
		return err
	}
	return writeFiles(chart, files)
}

// copied maps files of config/ to the chart files that are copies of them:
// kept in config/ so that there is one source, and copied because helm reads
// only files inside the chart.
var copied = map[string]string{
	"monitoring/grafana-dashboard.json": "dashboards/burstcache-instance.json",
}

// copyFiles adds the copies of config's files to files. A dashboard that is
// not valid JSON is refused here rather than by Grafana.
func copyFiles(config string, files map[string][]byte) error {
	for src, dst := range copied {
		b, err := os.ReadFile(filepath.Join(config, src))
		if err != nil {
			return fmt.Errorf("reading %s: %w", src, err)
		}
		if strings.HasSuffix(src, ".json") && !json.Valid(b) {
			return fmt.Errorf("%s is not valid JSON", src)
		}
		files[dst] = b
	}
	return nil
}

// docSeparator splits a multi-document YAML stream.
var docSeparator = regexp.MustCompile(`(?m)^---\s*$`)

// generate maps each kustomize object to a file of the chart, by path
// relative to the chart directory.
func generate(raw []byte) (map[string][]byte, error) {
	files := map[string][]byte{}
	for _, doc := range docSeparator.Split(string(raw), -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		obj := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return nil, fmt.Errorf("parsing a kustomize object: %w", err)
		}
		path, content, err := chartFile(obj)
		if err != nil {
			return nil, err
		}
		if path != "" {
			files[path] = content
		}
	}
	return files, nil
}

// chartFile renders one object; an empty path drops it.
func chartFile(obj map[string]any) (string, []byte, error) {
	kind, name := str(obj, "kind"), str(obj, "metadata", "name")
	switch kind {
	case "Namespace":
		return "", nil, nil
	case "CustomResourceDefinition":
		b, err := yaml.Marshal(obj)
		return "crds/" + name + ".yaml", b, err
	}
	cond := templatize(obj)
	b, err := yaml.Marshal(obj)
	if err != nil {
		return "", nil, fmt.Errorf("encoding %s %s: %w", kind, name, err)
	}
	body := header + expandSentinels(string(b))
	if cond != "" {
		body = header + "{{- if " + cond + " }}\n" + expandSentinels(string(b)) + "{{- end }}\n"
	}
	return "templates/generated/" + strings.ToLower(kind) + "-" + name + ".yaml", []byte(body), nil
}

const header = "# Generated from config/ by hack/chart.sh (make chart). Do not edit.\n"

// writeFiles replaces the generated parts of the chart with files.
func writeFiles(chart string, files map[string][]byte) error {
	for _, dir := range []string{"crds", "templates/generated", "dashboards"} {
		if err := os.RemoveAll(filepath.Join(chart, dir)); err != nil {
			return err
		}
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		full := filepath.Join(chart, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, bytes.TrimLeft(files[p], "\n"), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", p, err)
		}
	}
	return nil
}

// str reads a string at a path of nested maps, or "".
func str(obj map[string]any, path ...string) string {
	var cur any = obj
	for _, k := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = m[k]
	}
	s, _ := cur.(string)
	return s
}
