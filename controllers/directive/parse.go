package directive

import (
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// Request is what a set of directives asks for.
type Request struct {
	// Job is the spec of the job's own instance (jobdw), nil if none.
	Job *cachev1alpha1.CacheInstanceSpec
	// Persistent are the names of existing instances the job uses.
	Persistent []string
}

// LineError is a directive that cannot be translated.
type LineError struct {
	// Line is the 1-based line number in the annotation.
	Line int
	// Text is the line as written.
	Text string
	// Reason says what is wrong.
	Reason string
}

// Error returns "line N: reason: text".
func (e *LineError) Error() string {
	return fmt.Sprintf("line %d: %s: %q", e.Line, e.Reason, e.Text)
}

// Parse translates the directives in text. It stops at the first line it
// cannot translate and returns a *LineError.
func Parse(text string) (Request, error) {
	var req Request
	for i, raw := range strings.Split(text, "\n") {
		line := strings.TrimSpace(raw)
		if line == "" {
			continue
		}
		if err := parseLine(&req, line); err != "" {
			return Request{}, &LineError{Line: i + 1, Text: line, Reason: err}
		}
	}
	return req, nil
}

// parseLine applies one directive to req, or says why it cannot.
func parseLine(req *Request, line string) string {
	fields := strings.Fields(line)
	if fields[0] != "#DW" {
		return "not a #DW directive"
	}
	if len(fields) < 2 {
		return "missing the directive name"
	}
	apply, ok := directives[fields[1]]
	if !ok {
		return fmt.Sprintf("unknown directive %q (want jobdw, persistentdw, stage_in or stage_out)", fields[1])
	}
	opts, bad := options(fields[2:])
	if bad != "" {
		return bad
	}
	return apply(req, opts)
}

// directives are the translators of each directive by name.
var directives = map[string]func(*Request, map[string]string) string{
	"jobdw":        jobdw,
	"persistentdw": persistentdw,
	"stage_in":     stageIn,
	"stage_out":    stageOut,
}

// options splits key=value tokens; keys may appear once.
func options(tokens []string) (map[string]string, string) {
	opts := map[string]string{}
	for _, t := range tokens {
		k, v, ok := strings.Cut(t, "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Sprintf("malformed option %q (want key=value)", t)
		}
		if _, dup := opts[k]; dup {
			return nil, fmt.Sprintf("option %s given twice", k)
		}
		opts[k] = v
	}
	return opts, ""
}

// known checks that opts has only the allowed keys and all required ones.
func known(opts map[string]string, required []string, optional ...string) string {
	allowed := map[string]bool{}
	for _, k := range append(required, optional...) {
		allowed[k] = true
	}
	for k := range opts {
		if !allowed[k] {
			return fmt.Sprintf("unknown option %s", k)
		}
	}
	for _, k := range required {
		if _, ok := opts[k]; !ok {
			return fmt.Sprintf("missing option %s", k)
		}
	}
	return ""
}

var dnsName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

func persistentdw(req *Request, opts map[string]string) string {
	if bad := known(opts, []string{"name"}); bad != "" {
		return bad
	}
	if !dnsName.MatchString(opts["name"]) || len(opts["name"]) > 63 {
		return fmt.Sprintf("name %q is not a valid instance name", opts["name"])
	}
	req.Persistent = append(req.Persistent, opts["name"])
	return ""
}

// absPath checks that p is an absolute, clean path.
func absPath(key, p string) string {
	if !strings.HasPrefix(p, "/") || path.Clean(p) != p {
		return fmt.Sprintf("%s %q is not an absolute, clean path", key, p)
	}
	return ""
}

// size parses DataWarp sizes (100TiB, 10GB) and Kubernetes quantities.
func size(key, v string) (resource.Quantity, string) {
	s := v
	for _, suf := range []string{"KiB", "MiB", "GiB", "TiB", "PiB"} {
		s = strings.Replace(s, suf, strings.TrimSuffix(suf, "B"), 1)
	}
	for _, suf := range []string{"KB", "MB", "GB", "TB", "PB"} {
		if strings.HasSuffix(s, suf) {
			s = strings.TrimSuffix(s, "B")
			if suf == "KB" {
				s = strings.TrimSuffix(s, "K") + "k"
			}
		}
	}
	q, err := resource.ParseQuantity(s)
	if err != nil || q.Sign() <= 0 {
		return resource.Quantity{}, fmt.Sprintf("%s %q is not a positive size such as 100TiB", key, v)
	}
	return q, ""
}

func positiveInt(key, v string, maxV int64) (int64, string) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 || n > maxV {
		return 0, fmt.Sprintf("%s %q is not a whole number from 1 to %d", key, v, maxV)
	}
	return n, ""
}

func seconds(key, v string) (*metav1.Duration, string) {
	n, bad := positiveInt(key, v, 1<<31)
	if bad != "" {
		return nil, bad
	}
	return &metav1.Duration{Duration: time.Duration(n) * time.Second}, ""
}
