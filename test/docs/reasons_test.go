package docs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/burstcache/burstcache/test/repo"
)

// TestEveryReasonIsDocumented holds docs/troubleshooting.md to the
// condition and event reasons of the API: each Reason constant of
// api/v1alpha1 must appear there, as `Reason`, so that whoever reads it in
// kubectl describe finds what it means and what to do.
func TestEveryReasonIsDocumented(t *testing.T) {
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	guide, err := os.ReadFile(filepath.Join(root, "docs", "troubleshooting.md"))
	if err != nil {
		t.Fatal(err)
	}
	reasons := apiReasons(t, filepath.Join(root, "api", "v1alpha1"))
	if len(reasons) < 10 {
		t.Fatalf("found %d Reason constants in api/v1alpha1; it has more, so the parsing is broken", len(reasons))
	}
	for name, value := range reasons {
		if !strings.Contains(string(guide), "`"+value+"`") {
			t.Errorf("%s (%q) is not explained in docs/troubleshooting.md", name, value)
		}
	}
}

// apiReasons returns the string constants named Reason... of the Go package
// in dir, by name.
func apiReasons(t *testing.T, dir string) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			spec, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, name := range spec.Names {
				if !strings.HasPrefix(name.Name, "Reason") || i >= len(spec.Values) {
					continue
				}
				if lit, ok := spec.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					out[name.Name], _ = strconv.Unquote(lit.Value)
				}
			}
			return true
		})
	}
	return out
}
