package repo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrNotFound is returned by Root when no directory above the working
// directory holds a go.mod.
var ErrNotFound = errors.New("go.mod not found")

// Root returns the root of the checkout: the nearest directory at or above
// the working directory (the package directory under go test, the checkout
// under make) that holds go.mod.
func Root() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the repository root: %w", err)
	}
	return rootAbove(wd)
}

// rootAbove returns the nearest directory at or above dir that holds go.mod.
func rootAbove(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("above %s: %w", dir, ErrNotFound)
		}
	}
}
