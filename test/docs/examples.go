package docs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Example is one object shown in a document.
type Example struct {
	// Source is "file:line" of the code block that holds the object.
	Source string
	// Object is the object as written.
	Object *unstructured.Unstructured
}

// Examples returns the objects of every ```yaml code block of the Markdown
// files in dir that has an apiVersion and a kind. Blocks of other languages,
// and YAML fragments without apiVersion and kind (such as Helm values), are
// not objects and are left out.
func Examples(dir string) ([]Example, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []Example
	for _, f := range files {
		ex, err := fileExamples(f)
		if err != nil {
			return nil, err
		}
		out = append(out, ex...)
	}
	return out, nil
}

func fileExamples(path string) ([]Example, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []Example
	for _, b := range yamlBlocks(data) {
		objs, err := decodeAll(b.text)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, b.line, err)
		}
		for _, o := range objs {
			out = append(out, Example{Source: fmt.Sprintf("%s:%d", filepath.Base(path), b.line), Object: o})
		}
	}
	return out, nil
}

type block struct {
	line int
	text string
}

// yamlBlocks returns the fenced ```yaml blocks of a Markdown document, with
// the line each starts on.
func yamlBlocks(md []byte) []block {
	var out []block
	var cur *strings.Builder
	start := 0
	sc := bufio.NewScanner(bytes.NewReader(md))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && trimmed == "```yaml":
			cur, start = &strings.Builder{}, n+1
		case cur != nil && trimmed == "```":
			out = append(out, block{line: start, text: cur.String()})
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	return out
}

func decodeAll(text string) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(text), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		if m == nil || m["apiVersion"] == nil || m["kind"] == nil {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}
