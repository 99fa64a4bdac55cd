package policy

import (
	"fmt"
	"strings"
)

// Violation is one rule of the pool that an instance breaks.
type Violation struct {
	// Reason is the condition and Event reason, one of the Reason constants
	// of api/v1alpha1, such as PathNotAllowed.
	Reason string
	// Field is the offending field, such as "spec.backing.path".
	Field string
	// Message names the rule in a sentence a user can act on.
	Message string
}

// String returns "field: message (Reason)".
func (v Violation) String() string {
	return fmt.Sprintf("%s: %s (%s)", v.Field, v.Message, v.Reason)
}

// Violations are all the rules an instance breaks. A nil Violations means the
// instance is acceptable.
type Violations []Violation

// Err returns the violations as an error, or nil if there are none.
func (vs Violations) Err() error {
	if len(vs) == 0 {
		return nil
	}
	return &Error{Violations: vs}
}

// Error is the error form of Violations; match it with errors.As.
type Error struct {
	// Violations are the rules broken, at least one.
	Violations Violations
}

// Error joins the violations in one line.
func (e *Error) Error() string {
	parts := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		parts[i] = v.String()
	}
	return strings.Join(parts, "; ")
}

// Reason returns the reason of the first violation.
func (e *Error) Reason() string {
	return e.Violations[0].Reason
}
