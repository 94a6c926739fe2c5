package timearg

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestForms: every example `vh5fs help time` gives reads as the instant it stands for,
// and the help lists each of them.
func TestForms(t *testing.T) {
	want := time.Date(2024, 1, 1, 2, 30, 0, 0, time.UTC)
	help := Help()
	for _, f := range Forms() {
		if f.Example == "" {
			continue
		}
		got, err := ParseIn(f.Example, time.UTC)
		require.NoError(t, err, f.Example)
		if f.Example == "2024-01-01" {
			require.True(t, want.Truncate(24*time.Hour).Equal(got), "%s: %v", f.Example, got)
			continue
		}
		require.True(t, want.Equal(got), "%s: %v", f.Example, got)
		require.Contains(t, help, f.Example)
	}
}

func TestParse(t *testing.T) {
	cet := time.FixedZone("CET", 3600)
	at := func(h, m, s, ns int) time.Time { return time.Date(2026, 12, 7, h, m, s, ns, time.UTC) }
	for _, c := range []struct {
		in    string
		local *time.Location // whose zone names are accepted; nil: UTC
		want  time.Time
		err   string // a refusal holds this
	}{
		// The forms accepted before: no zone is UTC.
		{in: "2026-12-07 15:59:38", want: at(15, 59, 38, 0)},
		{in: "2026-12-07 15:59:38.25", want: at(15, 59, 38, 250e6)},
		{in: "2026-12-07 15:59:38.000000+0000", want: at(15, 59, 38, 0)},
		{in: "2026-12-07 16:59:38+01:00", want: at(15, 59, 38, 0)},
		{in: "2026-12-07 15:59", want: at(15, 59, 0, 0)},
		{in: "2026-12-07T15:59", want: at(15, 59, 0, 0)},
		{in: "2026-12-07T15:59Z", want: at(15, 59, 0, 0)},
		{in: "2026-12-07T16:59+01:00", want: at(15, 59, 0, 0)},
		{in: "2026-12-07T15:59:38", want: at(15, 59, 38, 0)},
		{in: "2026-12-07T15:59:38.123456789Z", want: at(15, 59, 38, 123456789)},
		{in: "2026-12-07", want: at(0, 0, 0, 0)},
		{in: "  2026-12-07 15:59:38\n", want: at(15, 59, 38, 0)},
		// A zone-less time is UTC whatever the local zone.
		{in: "2026-12-07 15:59:38", local: cet, want: at(15, 59, 38, 0)},
		{in: "2026-12-07", local: cet, want: at(0, 0, 0, 0)},
		// date '+%F %T %z' and the like: the zone after a space.
		{in: "2026-12-07 16:59:38 +0100", want: at(15, 59, 38, 0)},
		{in: "2026-12-07 14:59:38 -0100", want: at(15, 59, 38, 0)},
		{in: "2026-12-07 16:59:38 +01:00", want: at(15, 59, 38, 0)},
		{in: "2026-12-07 15:59:38 +0000", want: at(15, 59, 38, 0)},
		{in: "2026-12-07 15:59:38 Z", want: at(15, 59, 38, 0)},
		{in: "2026-12-07 16:59 +0100", want: at(15, 59, 0, 0)},
		{in: "2026-12-07T16:59:38 +0100", want: at(15, 59, 38, 0)},
		{in: "2026-12-07 16:59:38.5 +0100", want: at(15, 59, 38, 500e6)},
		{in: "2026-12-07 16:59:38+0100", want: at(15, 59, 38, 0)},
		// Zone names.
		{in: "2026-12-07 15:59:38 UTC", want: at(15, 59, 38, 0)},
		{in: "2026-12-07 15:59:38 GMT", want: at(15, 59, 38, 0)},
		{in: "2026-12-07 15:59 UTC", want: at(15, 59, 0, 0)},
		{in: "2026-12-07T15:59:38 UTC", want: at(15, 59, 38, 0)},
		{in: "2026-12-07 15:59:38 UTC", local: cet, want: at(15, 59, 38, 0)},
		{in: "2026-12-07 16:59:38 CET", local: cet, want: at(15, 59, 38, 0)},
		{in: "2026-12-07 16:59:38 CET", err: "zone CET is not UTC, GMT or the local zone's (UTC then): give its offset"},
		{in: "2026-12-07 15:59:38 PST", local: cet, err: "zone PST is not UTC, GMT or the local zone's (CET then)"},
		{in: "2026-12-07 15:59:38 GMT+3", err: "zone GMT+3"},
		// date --iso-8601=seconds, =ns (a comma before the fraction), --rfc-3339=seconds.
		{in: "2026-12-07T16:59:38+01:00", want: at(15, 59, 38, 0)},
		{in: "2026-12-07T16:59:38,123456789+01:00", want: at(15, 59, 38, 123456789)},
		{in: "2026-12-07 16:59:38+01:00", want: at(15, 59, 38, 0)},
		// date -R (RFC 2822), and with a zone name.
		{in: "Mon, 07 Dec 2026 16:59:38 +0100", want: at(15, 59, 38, 0)},
		{in: "Mon, 07 Dec 2026 15:59:38 +0000", want: at(15, 59, 38, 0)},
		{in: "Mon, 7 Dec 2026 15:59:38 -0000", want: at(15, 59, 38, 0)},
		{in: "Mon, 07 Dec 2026 15:59:38 GMT", want: at(15, 59, 38, 0)},
		{in: "Mon, 07 Dec 2026 16:59:38 CET", local: cet, want: at(15, 59, 38, 0)},
		{in: "Mon, 07 Dec 2026 15:59:38 EST", err: "zone EST"},
		// date in the C locale: a day of one digit is padded with a space.
		{in: "Mon Dec  7 15:59:38 UTC 2026", want: at(15, 59, 38, 0)},
		{in: "Mon Dec 7 15:59:38 UTC 2026", want: at(15, 59, 38, 0)},
		{in: "Mon Dec  7 16:59:38 CET 2026", local: cet, want: at(15, 59, 38, 0)},
		{in: "Mon Dec  7 15:59:38.5 UTC 2026", want: at(15, 59, 38, 500e6)},
		{in: "Mon Dec  7 15:59:38 MSK 2026", err: "zone MSK"},
		// Not times.
		{in: "yesterday", err: `cannot read time "yesterday"`},
		{in: "", err: `cannot read time ""`},
		{in: "2026-12-07 16:59:38 +01", want: at(15, 59, 38, 0)},
		{in: "Mon Dec  7 11:59:38 -04 2026", want: at(15, 59, 38, 0)},
		{in: "2026-12-07 15:59:38 +1", err: "cannot read time"},
		{in: "2026-12-07  16:59:38  +0100", want: at(15, 59, 38, 0)}, // runs of spaces are one
		{in: "2026-13-07", err: "cannot read time"},
		{in: "2026/12/07", err: "cannot read time"},
		{in: "1765123178", err: "cannot read time"},
	} {
		local := c.local
		if local == nil {
			local = time.UTC
		}
		got, err := ParseIn(c.in, local)
		if c.err != "" {
			require.Error(t, err, c.in)
			require.Contains(t, err.Error(), c.err, c.in)
			continue
		}
		require.NoError(t, err, c.in)
		require.True(t, c.want.Equal(got), "%q (local %s): got %v, want %v", c.in, local, got.UTC(), c.want)
	}
}

// TestNoSlash: at/TIME is a path component, so no accepted form needs a '/'.
func TestNoSlash(t *testing.T) {
	for _, f := range Forms() {
		require.False(t, strings.Contains(f.Example, "/"), f.Example)
	}
}
