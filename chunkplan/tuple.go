package chunkplan

import (
	"strconv"
	"strings"
)

// Tuple returns Python's repr of xs as a tuple: "(10,)" for one axis, "(3, 4)" otherwise,
// "()" for none. versioned-hdf5 hashes a chunk's shape in this form, and messages name
// shapes in it so that they read as the library's users write them.
func Tuple(xs []int64) string {
	var b strings.Builder
	b.WriteByte('(')
	for i, x := range xs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.FormatInt(x, 10))
	}
	if len(xs) == 1 {
		b.WriteByte(',')
	}
	b.WriteByte(')')
	return b.String()
}
