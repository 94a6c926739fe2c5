package main

// The history graph of `vh5fs log --all`: every version, newest first, with a lane per
// branch drawn as git log --graph draws one. Versions have one parent, so the history is
// a forest; printed in topological order with each branch contiguous (a version's main
// child's line first, then its other children's branches, newest first, then the
// version), the lanes that end at a branch point are always next to each other and join
// with "|/".

import (
	"sort"
	"strings"

	"github.com/vh5fs/vh5fs/versions"
)

// graphRow is one line of the graph: the lanes' drawing and, on a version's own line,
// the version (Name is "" on the lines that join lanes).
type graphRow struct {
	Graph   string
	Version versions.Version
}

// historyGraph lays out vs (any order). A parent that is not among vs (missing) ends its
// lane like the first version's does.
func historyGraph(vs []versions.Version, current string) []graphRow {
	byName := map[string]versions.Version{}
	for _, v := range vs {
		byName[v.Name] = v
	}
	children := map[string][]string{}
	var roots []string
	for _, v := range vs {
		if _, ok := byName[v.PrevVersion]; ok && v.PrevVersion != "" {
			children[v.PrevVersion] = append(children[v.PrevVersion], v.Name)
		} else {
			roots = append(roots, v.Name)
		}
	}
	// Newest first; a name breaks ties so the order is the same on every run.
	newer := func(a, b string) bool {
		ta, tb := byName[a].Time(), byName[b].Time()
		if !ta.Equal(tb) {
			return ta.After(tb)
		}
		return a > b
	}
	// The main line of a branch point is the child leading to the current version, else
	// the one with the newest descendant.
	newest := map[string]string{}
	onCurrent := map[string]bool{}
	var visit func(string) string
	visit = func(n string) string {
		best := n
		for _, c := range children[n] {
			if d := visit(c); newer(d, best) {
				best = d
			}
			if onCurrent[c] {
				onCurrent[n] = true
			}
		}
		if n == current {
			onCurrent[n] = true
		}
		newest[n] = best
		return best
	}
	for _, r := range roots {
		visit(r)
	}
	first := func(a, b string) bool {
		if onCurrent[a] != onCurrent[b] {
			return onCurrent[a]
		}
		return newer(newest[a], newest[b])
	}
	var order []string
	var emit func(string)
	emit = func(n string) {
		cs := append([]string(nil), children[n]...)
		sort.Slice(cs, func(i, j int) bool { return first(cs[i], cs[j]) })
		for _, c := range cs {
			emit(c)
		}
		order = append(order, n)
	}
	sort.Slice(roots, func(i, j int) bool { return first(roots[i], roots[j]) })
	for _, r := range roots {
		emit(r)
	}
	var rows []graphRow
	var lanes []string // the version each lane waits for
	for _, n := range order {
		var waiting []int
		for i, l := range lanes {
			if l == n {
				waiting = append(waiting, i)
			}
		}
		if len(waiting) == 0 {
			lanes = append(lanes, n)
			waiting = []int{len(lanes) - 1}
		}
		for len(waiting) > 1 {
			j := waiting[len(waiting)-1]
			rows = append(rows, graphRow{Graph: joinLine(len(lanes), j, false)})
			lanes = append(lanes[:j], lanes[j+1:]...)
			waiting = waiting[:len(waiting)-1]
		}
		c := waiting[0]
		marks := make([]string, len(lanes))
		for i := range marks {
			marks[i] = "|"
		}
		marks[c] = "*"
		rows = append(rows, graphRow{Graph: strings.Join(marks, " "), Version: byName[n]})
		parent := byName[n].PrevVersion
		if _, ok := byName[parent]; ok && parent != "" {
			lanes[c] = parent
			continue
		}
		// A first version ends its lane; lanes to its right move over.
		if c < len(lanes)-1 {
			rows = append(rows, graphRow{Graph: joinLine(len(lanes), c, true)})
		}
		lanes = append(lanes[:c], lanes[c+1:]...)
	}
	return rows
}

// joinLine draws n lanes of which lane j joins lane j-1 ("|/", "| |/"), or with end, ends
// ("|   /"); the lanes right of j move one column left with it ("|/ /").
func joinLine(n, j int, end bool) string {
	b := []byte(strings.Repeat(" ", 2*n))
	for i := 0; i < n; i++ {
		switch {
		case i < j:
			b[2*i] = '|'
		case i > j || !end:
			b[2*i-1] = '/'
		}
	}
	return strings.TrimRight(string(b), " ")
}
