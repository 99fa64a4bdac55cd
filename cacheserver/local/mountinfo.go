package local

import "strings"

// mountinfoHas reports whether a /proc/self/mountinfo text lists a mount on
// dir. Mount points are the fifth field, with spaces and the like escaped
// in octal.
func mountinfoHas(mountinfo, dir string) bool {
	unescape := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	for line := range strings.SplitSeq(mountinfo, "\n") {
		fields := strings.Fields(line)
		if len(fields) > 4 && unescape.Replace(fields[4]) == dir {
			return true
		}
	}
	return false
}

// Mounted reports whether something is mounted on dir.
func Mounted(dir string) bool { return mounted(dir) }
