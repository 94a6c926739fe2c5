package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// boundedLimit is the memory every command must stay within on a dataset of ten million
// chunks (or refuse it in one line).
const boundedLimit = 256 << 20

// benchBounded runs each reading command once on a file whose dataset has chunks chunks
// (one byte each, two versions) and prints its time and peak RSS against boundedLimit.
// The file is made by vh5fs modify --force, which the limit does not bind (it says so).
func benchBounded(cache, vh5fs string, chunks int, timeout time.Duration) error {
	if chunks <= 0 {
		return nil
	}
	src, err := cached(filepath.Join(cache, fmt.Sprintf("bounded-%d-src.h5", chunks)), func(tmp string) error {
		return run("/usr/bin/python3", "tests/py/make_versioned.py", tmp, "--shape", strconv.Itoa(chunks),
			"--chunks", strconv.Itoa(max(chunks/100, 1)), "--dtype", "|u1", "--modulo", "251", "--versions", "2")
	})
	if err != nil {
		return err
	}
	file, err := cached(filepath.Join(cache, fmt.Sprintf("bounded-%d.h5", chunks)), func(tmp string) error {
		if err := run("cp", src, tmp); err != nil {
			return err
		}
		return run(vh5fs, "modify", tmp, "data", "--chunks", "1", "--force")
	})
	if err != nil {
		return err
	}
	fmt.Printf("\ncommands on a dataset of %d one-byte chunks, 2 versions (target: peak RSS <= %d MiB, or a one-line refusal)\n", chunks, boundedLimit>>20)
	for _, args := range [][]string{
		{"fsck", file},
		{"info", file},
		{"info", file + ":v1/data"},
		{"ls", file, "v1"},
		{"log", file},
		{"diff", file, "v0", "v1"},
		{"delete", "-n", file, "v0"},
		{"refs", file, "v1"},
	} {
		if err := boundedRow(strings.ReplaceAll(strings.Join(args, " "), file, "FILE"), timeout, vh5fs, args...); err != nil {
			return err
		}
	}
	if err := boundedMountRow(vh5fs, file); err != nil {
		return err
	}
	// The commands that change the file, each on a fresh copy.
	for _, args := range [][]string{
		{"delete", "FILE", "v0"}, {"compact", "FILE", "-o", "FILE.out"},
		{"modify", "-n", "FILE", "data", "--chunks", "100000"}, {"modify", "FILE", "data", "--chunks", "100000"},
	} {
		work, cleanup, err := workCopy(file)
		if err != nil {
			return err
		}
		argv := make([]string, len(args))
		for i, a := range args {
			argv[i] = strings.ReplaceAll(a, "FILE", work)
		}
		err = boundedRow(strings.Join(args, " "), timeout, vh5fs, argv...)
		cleanup()
		if err != nil {
			return err
		}
	}
	return nil
}

// boundedMountRow mounts file read-only, reads version v1's dataset whole through the
// mount and prints the mount's row: the time from mount to unmount and the daemon's peak
// RSS.
func boundedMountRow(vh5fs, file string) error {
	start := time.Now()
	m, err := startMount(vh5fs, "mount", file)
	if err != nil {
		return err
	}
	f, err := os.Open(filepath.Join(m.dir, "versions", "v1", "data"))
	if err == nil {
		_, err = io.Copy(io.Discard, f)
		f.Close()
	}
	m.stop()
	if err != nil {
		return fmt.Errorf("reading v1/data through the mount: %w", err)
	}
	var rss int64
	if ru, ok := m.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = ru.Maxrss << 10
	}
	verdict := "ok"
	if rss > boundedLimit {
		verdict = "OVER"
	}
	fmt.Printf("  %-36s %11s  peak RSS %5d MiB  %s\n", "mount, read v1/data", ms(time.Since(start)), rss>>20, verdict)
	return nil
}

// boundedRow runs vh5fs with args and prints its row: time, peak RSS and the verdict.
func boundedRow(label string, timeout time.Duration, vh5fs string, args ...string) error {
	d, rss, code, stopped, err := timedRSS(timeout, vh5fs, args...)
	if err != nil {
		return err
	}
	verdict := "ok"
	switch {
	case stopped:
		verdict = fmt.Sprintf("stopped after %s", timeout)
	case rss > boundedLimit && code == 0:
		verdict = "OVER"
	case code != 0:
		verdict = fmt.Sprintf("exit %d", code)
	}
	fmt.Printf("  %-36s %11s  peak RSS %5d MiB  %s\n", label, ms(d), rss>>20, verdict)
	return nil
}

// timedRSS runs name with args, its output discarded, and returns its time, peak RSS and
// exit code; one still running after timeout is stopped.
func timedRSS(timeout time.Duration, name string, args ...string) (d time.Duration, rss int64, code int, stopped bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c := exec.CommandContext(ctx, name, args...)
	start := time.Now()
	err = c.Run()
	d = time.Since(start)
	if c.ProcessState == nil {
		return 0, 0, 0, false, fmt.Errorf("%s %v: %w", name, args, err)
	}
	if ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = ru.Maxrss << 10
	}
	return d, rss, c.ProcessState.ExitCode(), ctx.Err() != nil, nil
}
