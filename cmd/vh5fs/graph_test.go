package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/versions"
)

func TestHistoryGraph(t *testing.T) {
	// v builds a version whose timestamp is minute min of one day.
	v := func(name, parent string, min int) versions.Version {
		return versions.Version{Name: name, PrevVersion: parent, Timestamp: fmt.Sprintf("2024-01-01 00:%02d:00.000000+0000", min)}
	}
	for _, tc := range []struct {
		name    string
		vs      []versions.Version
		current string
		want    string
	}{
		{"line", []versions.Version{v("r1", "", 1), v("r2", "r1", 2), v("r3", "r2", 3)}, "r3", `
* r3
* r2
* r1`},
		{"one branch", []versions.Version{v("r1", "", 1), v("r2", "r1", 2), v("r3", "r2", 3), v("b1", "r2", 4), v("r4", "r3", 5)}, "r4", `
* r4
* r3
| * b1
|/
* r2
* r1`},
		// The main line is the one leading to the current version, even when a side
		// branch is newer.
		{"current on the older branch", []versions.Version{v("r1", "", 1), v("a", "r1", 2), v("b", "r1", 3), v("b2", "b", 4)}, "a", `
* a
| * b2
| * b
|/
* r1`},
		{"three children", []versions.Version{v("r1", "", 1), v("a", "r1", 2), v("b", "r1", 3), v("c", "r1", 4)}, "c", `
* c
| * b
| | * a
| |/
|/
* r1`},
		{"nested branches", []versions.Version{v("r1", "", 1), v("r2", "r1", 2), v("x", "r2", 3), v("x2", "x", 4), v("y", "x", 5), v("r3", "r2", 6)}, "r3", `
* r3
| * y
| | * x2
| |/
| * x
|/
* r2
* r1`},
		{"two roots (a missing parent)", []versions.Version{v("r1", "", 1), v("r2", "r1", 2), v("o1", "gone", 3), v("o2", "o1", 4)}, "r2", `
* r2
* r1
* o2
* o1`},
		{"empty", nil, "", ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var lines []string
			for _, r := range historyGraph(tc.vs, tc.current) {
				lines = append(lines, strings.TrimRight(r.Graph+" "+r.Version.Name, " "))
			}
			require.Equal(t, strings.TrimPrefix(tc.want, "\n"), strings.Join(lines, "\n"))
		})
	}
}

func TestJoinLine(t *testing.T) {
	for _, tc := range []struct {
		n, j int
		end  bool
		want string
	}{
		{2, 1, false, "|/"},
		{3, 2, false, "| |/"},
		{3, 1, false, "|/ /"},
		{3, 1, true, "|  /"},
		{2, 0, true, " /"},
	} {
		require.Equal(t, tc.want, joinLine(tc.n, tc.j, tc.end), "%+v", tc)
	}
}
