package policy

import (
	"path"
	"strings"
)

// isClean reports whether p is absolute and already in the form path.Clean
// gives it; only such paths can be compared with prefixes as strings.
func isClean(p string) bool {
	return strings.HasPrefix(p, "/") && path.Clean(p) == p
}

// under reports whether p is prefix or inside it, after cleaning both. A
// prefix matches whole path elements only: /lus/ab is not under /lus/a.
func under(p, prefix string) bool {
	p, prefix = path.Clean(p), path.Clean(prefix)
	if prefix == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == prefix || strings.HasPrefix(p, prefix+"/")
}
