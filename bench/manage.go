package main

// Suite "manage": managing versions. compact: a file of -compact-size MiB of raw_data
// chunks, half of them dead (freed by a shrink of raw_data, as a deletion of versions
// leaves them), rewritten by `vh5fs compact -o` against a plain `cp` of the file to the
// same disk (both followed by sync), with the sizes before and after and the live bytes.

import (
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
