package main

// Suite "manage": managing versions. compact: a file of -compact-size MiB of raw_data
// chunks, half of them dead (freed by a shrink of raw_data, as a deletion of versions
// leaves them), rewritten by `vh5fs compact -o` against a plain `cp` of the file to the
// same disk (both followed by sync), with the sizes before and after and the live bytes.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// compactTarget: compact takes at most this multiple of a cp's time.
const compactTarget = 2.0

func benchManage(cache, vh5fs string, reps, compactMiB int) error {
	if compactMiB <= 0 {
		return nil
	}
	file, err := cached(filepath.Join(cache, fmt.Sprintf("compact-%d.h5", compactMiB)), func(tmp string) error {
		n := int64(compactMiB) << 20 / 8
		if err := run("/usr/bin/python3", "tests/py/make_versioned.py", tmp, "--shape", strconv.FormatInt(n, 10),
			"--chunks", strconv.Itoa(writeChunkElems), "--versions", "2"); err != nil {
			return err
		}
		return run("/usr/bin/python3", "-c", deadHalf, tmp)
	})
	if err != nil {
		return err
	}
	st, err := os.Stat(file)
	if err != nil {
		return err
	}
	out := filepath.Join(cache, "compact.out")
	defer os.Remove(out)
	var cps, compacts []time.Duration
	var after int64
	var rss int64
	for range reps {
		os.Remove(out)
		d, err := timed("cp", file, out)
		if err != nil {
			return err
		}
		cps = append(cps, d)
		os.Remove(out)
		cmd := exec.Command(vh5fs, "compact", file, "-o", out)
		start := time.Now()
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("vh5fs compact: %v: %s", err, b)
		}
		if err := run("sync", "-f", out); err != nil {
			return err
		}
		compacts = append(compacts, time.Since(start))
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			rss = max(rss, ru.Maxrss<<10)
		}
		if fi, err := os.Stat(out); err == nil {
			after = fi.Size()
		}
	}
	live := int64(compactMiB) << 20
	cp, cm := median(cps, func(d time.Duration) time.Duration { return d }), median(compacts, func(d time.Duration) time.Duration { return d })
	fmt.Printf("\ncompact of a %d MiB-of-chunks file with half its chunks dead (medians of %d, alternating)\n", compactMiB, reps)
	fmt.Printf("  cp of the file (+sync)      %8s\n", ms(cp))
	fmt.Printf("  vh5fs compact -o (+sync)    %8s   %.2fx cp's speed (target >= %.2fx)   peak RSS %d MiB\n",
		ms(cm), float64(cp)/float64(cm), 1/compactTarget, rss>>20)
	fmt.Printf("  size before %d MiB, after %d MiB: live chunks %d MiB + metadata and the rest %.1f MiB\n",
		st.Size()>>20, after>>20, live>>20, float64(after-live)/(1<<20))
	return nil
}

// timed runs cp src dst and a sync of dst, and returns how long both took.
func timed(cp, src, dst string) (time.Duration, error) {
	start := time.Now()
	if err := run(cp, src, dst); err != nil {
		return 0, err
	}
	if err := run("sync", "-f", dst); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// deadHalf grows raw_data by as many chunks again, writes them, writes a small plain
// dataset after them, and shrinks raw_data back: the chunks beyond the new extent are
// freed space inside the file, which HDF5 keeps, as after a deletion of versions.
const deadHalf = `import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r+") as f:
    raw = f["_version_data/data/raw_data"]
    n, c = raw.shape[0], raw.chunks[0]
    raw.resize((2 * n,))
    for i in range(n, 2 * n, 64 * c):
        j = min(i + 64 * c, 2 * n)
        raw[i:j] = np.random.default_rng(i).random(j - i)
    f.flush()
    f["bench_pad"] = np.arange(128.0)
    f.flush()
    raw.resize((n,))
`

// benchDelete times deleting versions of a file of -delete-versions versions of a dataset
// of -delete-chunks 1 KiB chunks (each version rewriting one chunk): most of them (all
// but every 10th, as --keep-every 10 picks) and one in the middle, by `vh5fs delete` and
// by versioned-hdf5's delete_versions where importable, each on a fresh copy; time and
// peak RSS, medians of reps (the library's runs end at the first stopped after libTimeout).
func benchDelete(cache, vh5fs string, reps, chunks, nversions int, libTimeout time.Duration) error {
	if chunks <= 0 || nversions <= 0 {
		return nil
	}
	file, err := cached(filepath.Join(cache, fmt.Sprintf("delete-%d-%d.h5", chunks, nversions)), func(tmp string) error {
		return run("/usr/bin/python3", "tests/py/make_versioned.py", tmp, "--shape", strconv.Itoa(chunks*chunkElems),
			"--chunks", strconv.Itoa(chunkElems), "--versions", strconv.Itoa(nversions))
	})
	if err != nil {
		return err
	}
	var most []string
	for k := range nversions {
		if (nversions-1-k)%10 != 0 {
			most = append(most, "v"+strconv.Itoa(k))
		}
	}
	lib := versionedHDF5Available()
	fmt.Printf("\ndelete versions of %d (a dataset of %d chunks), medians of %d, each on a fresh copy\n", nversions, chunks, reps)
	for _, c := range []struct {
		what  string
		names []string
	}{
		{fmt.Sprintf("%d of %d", len(most), nversions), most},
		{fmt.Sprintf("1 of %d", nversions), []string{"v" + strconv.Itoa(nversions/2)}},
	} {
		var ours, theirs []time.Duration
		var ourRSS, theirRSS int64
		stopped := false
		for range reps {
			d, rss, _, err := timedOnCopy(file, 0, func(ctx context.Context, work string) *exec.Cmd {
				return exec.CommandContext(ctx, vh5fs, append([]string{"delete", work}, c.names...)...)
			})
			if err != nil {
				return err
			}
			ours, ourRSS = append(ours, d), max(ourRSS, rss)
			if !lib || stopped {
				continue
			}
			d, rss, stopped, err = timedOnCopy(file, libTimeout, func(ctx context.Context, work string) *exec.Cmd {
				return exec.CommandContext(ctx, "/usr/bin/python3", append([]string{"-c", libraryDelete, work}, c.names...)...)
			})
			if err != nil {
				return err
			}
			theirs, theirRSS = append(theirs, d), max(theirRSS, rss)
		}
		self := func(d time.Duration) time.Duration { return d }
		o := median(ours, self)
		fmt.Printf("  delete %-12s vh5fs %9s  peak RSS %4d MiB", c.what, ms(o), ourRSS>>20)
		switch {
		case !lib:
			fmt.Printf("   versioned-hdf5: not measured (import versioned_hdf5 fails)\n")
		case stopped:
			fmt.Printf("   versioned-hdf5 > %s (stopped)  peak RSS >= %4d MiB   >= %.1fx faster (target >= 10x)\n", libTimeout, theirRSS>>20, float64(libTimeout)/float64(o))
		default:
			l := median(theirs, self)
			fmt.Printf("   versioned-hdf5 %9s  peak RSS %4d MiB   %.1fx faster (target >= 10x)\n", ms(l), theirRSS>>20, float64(l)/float64(o))
		}
	}
	return nil
}

// timedOnCopy copies file, runs the command cmd makes for the copy, and returns its time
// and peak RSS; a command still running after timeout (0: none) is stopped (stopped true).
func timedOnCopy(file string, timeout time.Duration, cmd func(ctx context.Context, work string) *exec.Cmd) (d time.Duration, rss int64, stopped bool, err error) {
	work, cleanup, err := workCopy(file)
	if err != nil {
		return 0, 0, false, err
	}
	defer cleanup()
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	c := cmd(ctx, work)
	start := time.Now()
	b, err := c.CombinedOutput()
	d = time.Since(start)
	if c.ProcessState != nil {
		if ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage); ok {
			rss = ru.Maxrss << 10
		}
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return d, rss, true, nil
	}
	if err != nil {
		return 0, 0, false, fmt.Errorf("%v: %v: %s", c.Args[:2], err, b)
	}
	return d, rss, false, nil
}

// libraryDelete deletes the versions named after the file with versioned-hdf5.
const libraryDelete = `import sys, h5py
from versioned_hdf5 import delete_versions
with h5py.File(sys.argv[1], "r+") as f:
    delete_versions(f, sys.argv[2:])
`
