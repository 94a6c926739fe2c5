package lifecycle

import (
	"sort"
	"time"

	"github.com/vh5fs/vh5fs/versions"
)

// Policy picks versions to delete by age. One of its fields is set.
type Policy struct {
	KeepLast  int       // keep the KeepLast newest versions
	KeepEvery int       // keep the newest version and every KeepEvery-th older one
	Before    time.Time // delete the versions older than Before
}

// Select returns the versions of vs that p deletes, oldest first. Versions are ordered by
// timestamp (then name); the current version is never selected: a policy prunes history,
// it does not move current_version (name it to delete it).
func Select(vs []versions.Version, current string, p Policy) []string {
	sorted := append([]versions.Version(nil), vs...)
	sort.SliceStable(sorted, func(i, j int) bool {
		ti, tj := sorted[i].Time(), sorted[j].Time()
		if !ti.Equal(tj) {
			return ti.After(tj)
		}
		return sorted[i].Name > sorted[j].Name
	}) // newest first
	var out []string
	for i, v := range sorted {
		var del bool
		switch {
		case p.KeepLast > 0:
			del = i >= p.KeepLast
		case p.KeepEvery > 0:
			del = i%p.KeepEvery != 0
		case !p.Before.IsZero():
			del = v.Time().Before(p.Before)
		}
		if del && v.Name != current {
			out = append(out, v.Name)
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}
