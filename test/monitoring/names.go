package monitoring

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Errors of MetricNames, matched with errors.Is.
var (
	// ErrUnbalanced is an opening bracket without its closing one, or the
	// reverse.
	ErrUnbalanced = errors.New("unbalanced brackets")
	// ErrNoMetricName is a selector such as {__name__="x"} whose metric the
	// tokenizer cannot name.
	ErrNoMetricName = errors.New("selector without a metric name")
)

// keywords are words of PromQL, in lower case as PromQL ignores their case,
// that are never metric names: binary and set operators, modifiers,
// grouping clauses, aggregation operators (which may be followed by a
// grouping clause rather than by a parenthesis) and the special numbers.
var keywords = map[string]bool{
	"and": true, "or": true, "unless": true, "atan2": true, "bool": true, "offset": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
	"limitk": true, "limit_ratio": true, "inf": true, "nan": true,
}

// grouping are the keywords followed by a list of label names.
var grouping = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

// MetricNames returns the metric names expr selects, each once, in the
// order of their first use.
func MetricNames(expr string) ([]string, error) {
	toks, err := lex(expr)
	if err != nil {
		return nil, err
	}
	w := walker{toks: toks}
	for w.i = 0; w.i < len(toks); w.i++ {
		if err := w.step(); err != nil {
			return nil, fmt.Errorf("%s: %w", expr, err)
		}
	}
	if len(w.open) > 0 {
		return nil, fmt.Errorf("%s: %w: %q not closed", expr, ErrUnbalanced, w.open)
	}
	return w.names, nil
}

// walker visits the tokens of one expression.
type walker struct {
	toks  []token
	i     int
	open  []byte // brackets opened and not yet closed, innermost last
	names []string
	// labels is the depth of open at which a list of label names (a
	// grouping clause) started, or 0 when outside one.
	labels int
}

// step handles the token at w.i.
func (w *walker) step() error {
	t := w.toks[w.i]
	switch {
	case t.kind == punct:
		return w.bracket(t.text[0])
	case t.kind != ident || w.inside('{') || w.inside('[') || w.labels > 0:
		return nil
	case grouping[strings.ToLower(t.text)]:
		if w.next("(") {
			w.labels = len(w.open) + 1
		}
	case !keywords[strings.ToLower(t.text)] && !w.next("("):
		if !slices.Contains(w.names, t.text) {
			w.names = append(w.names, t.text)
		}
	}
	return nil
}

// bracket tracks opening and closing brackets, and checks that a selector
// follows a metric name.
func (w *walker) bracket(c byte) error {
	pairs := map[byte]byte{')': '(', '}': '{', ']': '['}
	switch c {
	case '{':
		if w.i == 0 || w.toks[w.i-1].kind != ident || keywords[strings.ToLower(w.toks[w.i-1].text)] {
			return ErrNoMetricName
		}
		w.open = append(w.open, c)
	case '(', '[':
		w.open = append(w.open, c)
	case ')', '}', ']':
		if len(w.open) == 0 || w.open[len(w.open)-1] != pairs[c] {
			return fmt.Errorf("%w: unexpected %q", ErrUnbalanced, c)
		}
		if len(w.open) == w.labels {
			w.labels = 0
		}
		w.open = w.open[:len(w.open)-1]
	}
	return nil
}

// inside says whether an open bracket c encloses the current token.
func (w *walker) inside(c byte) bool { return slices.Contains(w.open, c) }

// next says whether the token after the current one is text.
func (w *walker) next(text string) bool {
	return w.i+1 < len(w.toks) && w.toks[w.i+1].text == text
}
