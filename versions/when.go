package versions

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/vh5fs/vh5fs/h5"
)

// TimestampLayout is versioned-hdf5's canonical timestamp form (UTC, microseconds).
const TimestampLayout = "2006-01-02 15:04:05.000000-0700"

// CanonicalTimestamp renders t as versioned-hdf5 stores timestamps.
func CanonicalTimestamp(t time.Time) string { return t.UTC().Format(TimestampLayout) }

// VersionAt resolves the version current at time t with versioned-hdf5's rule: the version
// whose timestamp is exactly t (in canonical form), else the newest version whose timestamp
// is strictly before t. ok is false when every version is younger than t.
func (f *File) VersionAt(t time.Time) (v Version, ok bool, err error) {
	vs, err := f.Versions()
	if err != nil {
		return Version{}, false, err
	}
	want := CanonicalTimestamp(t)
	var best Version
	var bestTime time.Time
	for _, c := range vs {
		if c.Timestamp == want {
			return c, true, nil
		}
		ct := c.Time()
		if ct.IsZero() || !ct.Before(t) {
			continue
		}
		if !ok || ct.After(bestTime) || (ct.Equal(bestTime) && c.Name > best.Name) {
			best, bestTime, ok = c, ct, true
		}
	}
	return best, ok, nil
}

// DatasetPaths lists the datasets of a committed version, relative to the version and
// sorted ("a/b/ds").
func (f *File) DatasetPaths(version string) ([]string, error) {
	v, ok, err := f.Version(version)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("version %s: %w", version, ErrNotFound)
	}
	var out []string
	var walk func(dir, rel string) error
	walk = func(dir, rel string) error {
		entries, err := f.List(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if e.IsGroup {
				if err := walk(dir+"/"+e.Name, rel+e.Name+"/"); err != nil {
					return err
				}
				continue
			}
			out = append(out, rel+e.Name)
		}
		return nil
	}
	if err := walk(v.Path(), ""); err != nil {
		return nil, err
	}
	sort.Strings(out)
	return out, nil
}

// VersionDataset opens dataset rel ("a/b/ds") of a committed version.
func (f *File) VersionDataset(version, rel string) (*Dataset, error) {
	v, ok, err := f.Version(version)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("version %s: %w", version, ErrNotFound)
	}
	p := v.Path() + "/" + strings.Trim(rel, "/")
	k, err := f.Kind(p)
	if err != nil {
		return nil, err
	}
	if k != h5.KindDataset {
		return nil, fmt.Errorf("%s in version %s: %w", rel, version, ErrNotFound)
	}
	return f.Dataset(p)
}
