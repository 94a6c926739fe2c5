package writefile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"unicode/utf8"
)

// TextError is content of a variable-length string dataset's file that is not its text
// form (versions.TextForm): Line is the 1-based line at fault (0: the whole content).
type TextError struct {
	Line   int
	Reason string
}

func (e *TextError) Error() string {
	if e.Line == 0 {
		return "string dataset: " + e.Reason
	}
	return fmt.Sprintf("string dataset: line %d: %s", e.Line, e.Reason)
}

// Unwrap makes every TextError EINVAL for the caller.
func (e *TextError) Unwrap() error { return syscall.EINVAL }

// ParseStrings parses the text form of a variable-length string dataset: one JSON
// string per line, each line newline-terminated, elements in C order. Strict, as the
// file is the only way the dataset's values come in: a line that is not exactly one JSON
// string, a missing final newline or bytes that are not UTF-8 are refused rather than
// guessed at. ascii refuses non-ASCII values (h5py's ASCII string type). rowLen, the
// product of the axes after the first, must divide the count, which becomes axis 0.
func ParseStrings(text []byte, ascii bool, rowLen int64) ([]string, error) {
	if len(text) > 0 && text[len(text)-1] != '\n' {
		return nil, &TextError{Line: bytes.Count(text, []byte{'\n'}) + 1, Reason: "no newline at the end of the last line"}
	}
	out := make([]string, 0, bytes.Count(text, []byte{'\n'}))
	// Plain lines (no escapes) become substrings of one copy of the text: a million
	// json.Unmarshal calls take a second.
	whole := string(text)
	for line, at := 1, 0; at < len(whole); line++ {
		i := strings.IndexByte(whole[at:], '\n')
		l := text[at : at+i]
		start := at
		at += i + 1
		if err := checkLine(l); err != nil {
			return nil, &TextError{Line: line, Reason: err.Error()}
		}
		var s string
		if plain(l[1 : len(l)-1]) {
			s = whole[start+1 : start+i-1]
		} else if err := json.Unmarshal(l, &s); err != nil {
			return nil, &TextError{Line: line, Reason: "not a JSON string: " + err.Error()}
		}
		if strings.IndexByte(s, 0) >= 0 {
			return nil, &TextError{Line: line, Reason: "holds a NUL character (\\u0000), which HDF5's strings end at"}
		}
		if ascii {
			for k := 0; k < len(s); k++ {
				if s[k] >= utf8.RuneSelf {
					return nil, &TextError{Line: line, Reason: "not ASCII, which this dataset holds"}
				}
			}
		}
		out = append(out, s)
	}
	if rowLen > 0 && int64(len(out))%rowLen != 0 {
		return nil, &TextError{Reason: fmt.Sprintf("%d strings are not whole rows of %d", len(out), rowLen)}
	}
	if rowLen == 0 && len(out) > 0 {
		return nil, &TextError{Reason: fmt.Sprintf("%d strings for rows of no elements", len(out))}
	}
	return out, nil
}

// plain reports whether b, the inside of a JSON string, holds no escape, quote or control
// character: it is then the string's bytes as they are.
func plain(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// checkLine refuses what json.Unmarshal into a string would take or silently change:
// any JSON value but a string ("null" leaves the string as it was), and bytes that are
// not UTF-8 (replaced by U+FFFD).
func checkLine(l []byte) error {
	if !utf8.Valid(l) {
		return errors.New("not UTF-8")
	}
	l = bytes.TrimRight(l, "\r")
	if len(l) < 2 || l[0] != '"' || l[len(l)-1] != '"' {
		return errors.New("not one JSON string (a line is one element: a JSON string, e.g. \"text\")")
	}
	return nil
}
