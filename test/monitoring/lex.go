package monitoring

import (
	"fmt"
	"strings"
)

// kind is the kind of a token.
type kind int

const (
	ident    kind = iota // a word: metric, label, function or keyword
	str                  // a quoted string
	number               // a number or a duration
	variable             // a Grafana $variable or ${variable}
	punct                // one character of punctuation or an operator
)

// token is one lexical element of an expression.
type token struct {
	kind kind
	text string
}

// lex splits expr into tokens; white space and comments are dropped.
func lex(expr string) ([]token, error) {
	var toks []token
	for i := 0; i < len(expr); {
		n, k, err := scan(expr[i:])
		if err != nil {
			return nil, fmt.Errorf("at offset %d: %w", i, err)
		}
		if k >= 0 {
			toks = append(toks, token{kind: kind(k), text: expr[i : i+n]})
		}
		i += n
	}
	return toks, nil
}

// scan returns the length and kind of the token s starts with; kind -1 is
// white space or a comment.
func scan(s string) (int, int, error) {
	c := s[0]
	switch {
	case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		return 1, -1, nil
	case c == '#':
		if end := strings.IndexByte(s, '\n'); end >= 0 {
			return end, -1, nil
		}
		return len(s), -1, nil
	case c == '"' || c == '\'' || c == '`':
		n, err := quoted(s)
		return n, int(str), err
	case c == '$':
		return variableLen(s), int(variable), nil
	case isIdentStart(c):
		return span(s, isIdentChar), int(ident), nil
	case isDigit(c) || c == '.' && len(s) > 1 && isDigit(s[1]):
		// Durations (5m, 1h30m) and numbers (1e3, 0x1f, 1.5) alike.
		return span(s, func(b byte) bool { return isIdentChar(b) || b == '.' }), int(number), nil
	}
	return 1, int(punct), nil
}

// quoted returns the length of the string s starts with, its quotes
// included. Backquoted strings have no escapes.
func quoted(s string) (int, error) {
	q := s[0]
	for i := 1; i < len(s); i++ {
		switch {
		case s[i] == '\\' && q != '`':
			i++
		case s[i] == q:
			return i + 1, nil
		}
	}
	return 0, fmt.Errorf("unterminated string %s", s)
}

// variableLen returns the length of the Grafana variable s starts with:
// $name, ${name} or ${name:format}.
func variableLen(s string) int {
	if strings.HasPrefix(s, "${") {
		if end := strings.IndexByte(s, '}'); end >= 0 {
			return end + 1
		}
	}
	return 1 + span(s[1:], isIdentChar)
}

func span(s string, ok func(byte) bool) int {
	n := 0
	for n < len(s) && ok(s[n]) {
		n++
	}
	return n
}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isIdentChar(c byte) bool { return isIdentStart(c) || isDigit(c) }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
