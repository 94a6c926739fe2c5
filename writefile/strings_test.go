package writefile

import (
	"errors"
	"slices"
	"syscall"
	"testing"
)

func TestParseStrings(t *testing.T) {
	for _, tc := range []struct {
		name   string
		text   string
		ascii  bool
		rowLen int64
		want   []string
		line   int // the TextError's line; -1: no error
	}{
		{"empty", "", false, 1, nil, -1},
		{"utf8", "\"a\"\n\"é\\u00e9\"\n\"\"\n\"tab\\tq\\\"\"\n", false, 1, []string{"a", "éé", "", "tab\tq\""}, -1},
		{"2-D whole rows", "\"a\"\n\"b\"\n\"c\"\n\"d\"\n", false, 2, []string{"a", "b", "c", "d"}, -1},
		{"2-D wrong count", "\"a\"\n\"b\"\n\"c\"\n", false, 2, nil, 0},
		{"no final newline", "\"a\"\n\"b\"", false, 1, nil, 2},
		{"bad JSON", "\"a\"\n\"b\n", false, 1, nil, 2},
		{"number", "\"a\"\n12\n", false, 1, nil, 2},
		{"null", "null\n", false, 1, nil, 1},
		{"two strings", "\"a\" \"b\"\n", false, 1, nil, 1},
		{"array", "[\"a\"]\n", false, 1, nil, 1},
		{"empty line", "\"a\"\n\n", false, 1, nil, 2},
		{"not UTF-8", "\"\xff\"\n", false, 1, nil, 1},
		{"ascii ok", "\"AAPL\"\n", true, 1, []string{"AAPL"}, -1},
		{"non-ASCII into ascii", "\"ok\"\n\"é\"\n", true, 1, nil, 2},
		{"escaped non-ASCII into ascii", "\"\\u00e9\"\n", true, 1, nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseStrings([]byte(tc.text), tc.ascii, tc.rowLen)
			if tc.line < 0 {
				if err != nil || !slices.Equal(got, tc.want) {
					t.Fatalf("got %q, %v; want %q", got, err, tc.want)
				}
				return
			}
			var te *TextError
			if !errors.As(err, &te) || te.Line != tc.line || !errors.Is(err, syscall.EINVAL) {
				t.Fatalf("err %v; want a TextError of line %d (EINVAL)", err, tc.line)
			}
		})
	}
}
