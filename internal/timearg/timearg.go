// Package timearg reads a point in time given to vh5fs (--at, --before, -o at=, a mount's
// at/TIME), in the forms people type and the forms date(1) prints. Help lists exactly
// the forms Parse accepts; the tests parse each of its examples.
package timearg

import (
	"fmt"
	"strings"
	"time"
)

// Form is a line of `vh5fs help time`: an accepted form and what it is, or (Example
// empty) a line that says how the next ones go on from the previous.
type Form struct {
	Example string // a time in this form, read as 2024-01-01 02:30:00 UTC
	Note    string
}

// Forms lists the forms Parse accepts, each with an example it reads as
// 2024-01-01 02:30:00 UTC.
func Forms() []Form {
	return []Form{
		{"2024-01-01", "a date alone: its first instant, UTC"},
		{"2024-01-01 02:30", "a date and a time: hours and minutes,"},
		{"2024-01-01 02:30:00", "with seconds,"},
		{"2024-01-01 02:30:00.000000", "with a fraction of a second (after . or ,);"},
		{"2024-01-01T02:30:00", "T instead of the space;"},
		{"", "then, optionally, a zone, right after the time or after a space:"},
		{"2024-01-01T02:30:00Z", "Z"},
		{"2024-01-01T03:30:00+01:00", "+01:00 (RFC 3339, date --iso-8601=seconds, date --rfc-3339=seconds)"},
		{"2024-01-01 03:30:00 +0100", "+0100 (date '+%F %T %z')"},
		{"2024-01-01 02:30 UTC", "after a space, a name: UTC, GMT, or one of the local zone's (CET where TZ is Europe/Paris)"},
		{"2024-01-01 03:30 +01", "or the hours of the offset alone, as date prints a zone without a name"},
		{"", "or"},
		{"Mon, 01 Jan 2024 03:30:00 +0100", "date -R (RFC 2822), or with a zone name as above"},
		{"Mon Jan  1 02:30:00 UTC 2024", "date's default output in the C locale"},
	}
}

// Help is the text of `vh5fs help time`.
func Help() string {
	var b strings.Builder
	b.WriteString("TIME (--at, --before, -o at=TIME, MNT/at/TIME) in one of these forms:\n")
	for _, f := range Forms() {
		if f.Example == "" {
			fmt.Fprintf(&b, "  %s\n", f.Note)
			continue
		}
		fmt.Fprintf(&b, "    %-32s %s\n", f.Example, f.Note)
	}
	b.WriteString(`A time without a zone is UTC, as versioned-hdf5 stores timestamps. A fraction of a
second may follow the seconds in every form. Other zone names are refused (a name alone
does not say its offset): give the offset. In -o at=TIME write a comma as \,. The version
current at TIME is the one whose timestamp is exactly TIME, else the newest version
whose timestamp is strictly before TIME (versioned-hdf5's rule).
`)
	return b.String()
}

// Parse reads s in one of the forms Forms lists. Zone names other than UTC and GMT are
// those of the local zone (time.Local).
func Parse(s string) (time.Time, error) { return ParseIn(s, time.Local) }

// ParseIn is Parse with local as the zone whose names are accepted: a name is an offset
// only in a zone that uses it, and time.Parse gives an unknown name the offset 0, which
// would shift the time silently.
func ParseIn(s string, local *time.Location) (time.Time, error) {
	s = strings.TrimSpace(s)
	// Go's parser reads a fraction after the seconds without it in the layout, with a . or a ,.
	var clocks []string
	for _, sep := range []string{" ", "T"} {
		clocks = append(clocks, "2006-01-02"+sep+"15:04:05", "2006-01-02"+sep+"15:04")
	}
	for _, c := range clocks {
		// No zone: UTC, whatever the local zone.
		if t, err := time.ParseInLocation(c, s, time.UTC); err == nil {
			return t, nil
		}
		for _, z := range []string{"Z07:00", "Z0700", " Z07:00", " Z0700"} {
			if t, err := time.Parse(c+z, s); err == nil {
				return t, nil
			}
		}
		if t, err := time.ParseInLocation(c+" MST", s, local); err == nil {
			return named(s, t, local)
		}
	}
	if t, err := time.ParseInLocation("2006-01-02", s, time.UTC); err == nil {
		return t, nil
	}
	for _, l := range []string{"Mon, _2 Jan 2006 15:04:05 -0700", "Mon, _2 Jan 2006 15:04:05 MST", "Mon Jan _2 15:04:05 MST 2006"} {
		if t, err := time.ParseInLocation(l, s, local); err == nil {
			if strings.Contains(l, "MST") {
				return named(s, t, local)
			}
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("cannot read time %q (want e.g. \"2024-01-01 02:30:00\", UTC unless a zone is given)", s)
}

// named checks the zone name t was parsed with: UTC, GMT, one local uses at t, or an
// offset (+04: what date prints for %Z in zones without a name, which time.Parse reads
// as a name of offset 0).
func named(s string, t time.Time, local *time.Location) (time.Time, error) {
	name, off := t.Zone()
	if (name == "UTC" || name == "GMT") && off == 0 {
		return t, nil
	}
	if o, err := time.Parse("-07", name); err == nil {
		_, off := o.Zone()
		return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.FixedZone(name, off)), nil
	}
	ln, loff := t.In(local).Zone()
	if ln == name && loff == off {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("time %q: zone %s is not UTC, GMT or the local zone's (%s then): give its offset, e.g. +0100",
		s, name, ln)
}
