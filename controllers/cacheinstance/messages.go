package cacheinstance

import (
	"fmt"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// The API server refuses an object or Event whose message is longer than
// these (status.lastRequest.message, a condition's message, an Event's
// note). Messages carry the servers' errors, which a preload of a tree of
// many unreadable directories makes long: one refused would leave the
// whole status unwritten, pass after pass, or the Event unrecorded.
const (
	maxRequestMessage   = 4096
	maxConditionMessage = 32768
	maxEventNote        = 1024
)

// status.lastRequest also holds the id and the path of a request as the
// annotation gave them, which may be longer than the API server takes there
// when the request is refused for it.
const (
	maxRequestID   = 253
	maxRequestPath = 4096
)

// clip returns msg cut to at most max bytes, on a character boundary,
// saying how much was left out.
func clip(msg string, max int) string {
	if len(msg) <= max {
		return msg
	}
	// The note of what was left out is no longer than this one.
	end := max - len(fmt.Sprintf(" ... (%d more bytes)", len(msg)))
	for end > 0 && !utf8.RuneStart(msg[end]) {
		end--
	}
	return msg[:end] + fmt.Sprintf(" ... (%d more bytes)", len(msg)-end)
}

// BoundedRecorder returns a recorder that records the Events of r with
// their notes cut to what the API server takes.
func BoundedRecorder(r events.EventRecorder) events.EventRecorder {
	return boundedRecorder{r}
}

type boundedRecorder struct {
	events.EventRecorder
}

func (b boundedRecorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	b.EventRecorder.Eventf(regarding, related, eventtype, reason, action, "%s", clip(fmt.Sprintf(note, args...), maxEventNote))
}
