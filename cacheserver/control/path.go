package control

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Path is a path, or any string that names something in a file system,
// that JSON carries byte for byte. Names in a file system are bytes, not
// text: a file may be called "caf\xe9" by a system that wrote Latin-1, and
// encoding/json turns every byte that is not UTF-8 into U+FFFD, so that a
// plain string field would name another file.
//
// A Path that is valid UTF-8 is a JSON string, exactly what a string field
// holds (control characters, quotes and backslashes are escaped, and come
// back as they were). Any other is an object that holds its bytes,
// {"base64": "Y2Fm6Q=="}, which a decoder that expects a string refuses:
// a peer of an earlier release fails instead of acting on another path.
type Path string

// pathBytes is the JSON form of a Path that is not valid UTF-8.
type pathBytes struct {
	Base64 []byte `json:"base64"`
}

// MarshalJSON returns p as a JSON string if it is valid UTF-8, else as an
// object that holds its bytes.
func (p Path) MarshalJSON() ([]byte, error) {
	if utf8.ValidString(string(p)) {
		return json.Marshal(string(p))
	}
	return json.Marshal(pathBytes{Base64: []byte(p)})
}

// UnmarshalJSON takes either form MarshalJSON writes; null leaves p as it
// is, as it does a string. It refuses a string of bytes that are not UTF-8,
// which encoding/json would take with U+FFFD in their place.
func (p *Path) UnmarshalJSON(b []byte) error {
	if !utf8.Valid(b) {
		return fmt.Errorf("a path in JSON must be UTF-8, or {\"base64\": ...} of its bytes")
	}
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*p = Path(s)
		return nil
	}
	var raw pathBytes
	if err := json.Unmarshal(b, &raw); err != nil || raw.Base64 == nil {
		return fmt.Errorf("a path must be a JSON string or {\"base64\": ...}, not %.40s", b)
	}
	*p = Path(raw.Base64)
	return nil
}
