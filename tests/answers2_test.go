package tests

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// vh5fsRunEnv is vh5fsRun with env added to the environment.
func vh5fsRunEnv(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(vh5fsBin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		exit, ok := err.(*exec.ExitError)
		require.True(t, ok, "%v", err)
		code = exit.ExitCode()
	}
	return stdout.String(), stderr.String(), code
}

// TestAnswers2Times: --at, --before and at/TIME take a time as date(1) prints it, in its
// default C-locale form, with -R, '+%F %T %z', --iso-8601 and --rfc-3339, in UTC and in a
// zone with a name (Europe/Paris: CET in January, one hour ahead; the daemon and the
// commands run with the same TZ, as on one machine). basic_1d's v1..v4 are stamped 2024-01-01 00:00..03:00 UTC; the time
// is 02:30 UTC, so v3 is current then and v1..v3 are older.
func TestAnswers2Times(t *testing.T) {
	if _, err := exec.LookPath("date"); err != nil {
		t.Skip("no date")
	}
	const at = "@1704076200" // 2024-01-01 02:30:00 UTC
	formats := [][]string{{}, {"-R"}, {"+%F %T %z"}, {"--iso-8601=seconds"}, {"--iso-8601=ns"}, {"--rfc-3339=seconds"}}
	file := copyPath(t, fixturePath("basic_1d.h5"))
	for _, tz := range []string{"UTC", "Europe/Paris"} {
		if _, err := os.Stat("/usr/share/zoneinfo/" + tz); err != nil {
			t.Logf("%s: no zoneinfo, skipped", tz)
			continue
		}
		env := []string{"TZ=" + tz, "LC_ALL=C"}
		var times []string
		for _, f := range formats {
			cmd := exec.Command("date", append([]string{"-d", at}, f...)...)
			cmd.Env = append(os.Environ(), env...)
			out, err := cmd.Output()
			require.NoError(t, err, "date %v", f)
			times = append(times, strings.TrimSpace(string(out)))
		}
		t.Run(tz, func(t *testing.T) {
			for _, tm := range times {
				out, stderr, code := vh5fsRunEnv(t, env, "log", "--oneline", "-n", "1", "--at", tm, file)
				require.Equal(t, 0, code, "%q: %s", tm, stderr)
				require.True(t, strings.HasPrefix(out, "v3 "), "%q: %s", tm, out)
				out, stderr, code = vh5fsRunEnv(t, env, "delete", "-n", file, "--before", tm)
				require.Equal(t, 0, code, "%q: %s", tm, stderr)
				require.Contains(t, out, "would delete 3 of 4 versions", tm)
			}
			mnt := t.TempDir()
			m := startMount(t, mnt, vh5fsArgs(file, mnt, "ro"), env...)
			defer m.unmount(t)
			want, err := os.ReadFile(filepath.Join(mnt, "versions", "v3", "x"))
			require.NoError(t, err)
			for _, tm := range times {
				link, err := os.Readlink(filepath.Join(mnt, "at", tm))
				require.NoError(t, err, tm)
				require.Equal(t, "../versions/v3", link, tm)
				got, err := os.ReadFile(filepath.Join(mnt, "at", tm, "x"))
				require.NoError(t, err, tm)
				require.Equal(t, want, got, tm)
			}
			// A zone name that is neither UTC, GMT nor the local zone's says no offset.
			_, err = os.Lstat(filepath.Join(mnt, "at", "2024-01-01 02:30:00 PST"))
			require.ErrorIs(t, err, os.ErrNotExist)
			_, stderr, code := vh5fsRunEnv(t, env, "log", "--at", "2024-01-01 02:30:00 PST", file)
			require.Equal(t, 2, code)
			require.Contains(t, stderr, "zone PST is not UTC, GMT or the local zone's")
		})
	}
	help, _, code := vh5fsRun(t, "help", "time")
	require.Equal(t, 0, code)
	for _, form := range []string{"Mon Jan  1 02:30:00 UTC 2024", "date -R", "date '+%F %T %z'", "--iso-8601=seconds", "2024-01-01 03:30:00 +0100"} {
		require.Contains(t, help, form)
	}
}
