package main

// Suite "manage", row modify: a float64 dataset of -modify-size MiB with 100 versions
// (v0 writes it whole, each later one rewrites one chunk: tests/py/make_versioned.py)
// rechunked to chunks twice as long by `vh5fs modify`, time and peak RSS, against
// versioned-hdf5's modify_metadata of the same file where python3 imports it ("not
// measured" otherwise; stopped after -modify-lib-timeout).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

const modifyVersions = 100

// modifyLibScript runs the library's modify_metadata: FILE CHUNKS.
const modifyLibScript = `import sys, h5py
from versioned_hdf5.replay import modify_metadata
with h5py.File(sys.argv[1], "r+") as f:
    modify_metadata(f, "data", chunks=(int(sys.argv[2]),))
`

func benchModify(cache, vh5fs string, reps, sizeMiB int, libTimeout time.Duration) error {
	if sizeMiB <= 0 {
		return nil
	}
	src, err := cached(filepath.Join(cache, fmt.Sprintf("modify-%d.h5", sizeMiB)), func(tmp string) error {
		n := int64(sizeMiB) << 20 / 8
		return run("/usr/bin/python3", "tests/py/make_versioned.py", tmp, "--shape", strconv.FormatInt(n, 10),
			"--chunks", strconv.Itoa(writeChunkElems), "--versions", strconv.Itoa(modifyVersions))
	})
	if err != nil {
		return err
	}
	chunks := strconv.Itoa(2 * writeChunkElems)
	work := filepath.Join(cache, "modify.work.h5")
	defer os.Remove(work)
	var times []time.Duration
	var rss int64
	for range reps {
		if err := run("cp", src, work); err != nil {
			return err
		}
		cmd := exec.Command(vh5fs, "modify", work, "data", "--chunks", chunks)
		start := time.Now()
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("vh5fs modify: %v: %s", err, b)
		}
		times = append(times, time.Since(start))
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			rss = max(rss, ru.Maxrss<<10)
		}
	}
	d := median(times, func(d time.Duration) time.Duration { return d })
	fmt.Printf("\nmodify: rechunk (%d,) -> (%s,) of a %d MiB float64 dataset with %d versions (each after the first rewrites one chunk); median of %d, %d cores\n",
		writeChunkElems, chunks, sizeMiB, modifyVersions, reps, runtime.NumCPU())
	fmt.Printf("  vh5fs modify                %8s   peak RSS %d MiB\n", ms(d), rss>>20)
	lib := "not measured (versioned_hdf5 is not importable by /usr/bin/python3)"
	if exec.Command("/usr/bin/python3", "-c", "import versioned_hdf5").Run() == nil {
		if err := run("cp", src, work); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), libTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "/usr/bin/python3", "-c", modifyLibScript, work, chunks)
		start := time.Now()
		b, err := cmd.CombinedOutput()
		took := time.Since(start)
		var librss int64
		if cmd.ProcessState != nil {
			if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
				librss = ru.Maxrss << 10
			}
		}
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			lib = fmt.Sprintf("> %s (stopped)   peak RSS >= %d MiB   >= %.1fx vh5fs's time", libTimeout, librss>>20, float64(took)/float64(d))
		case err != nil:
			return fmt.Errorf("versioned-hdf5 modify_metadata: %v: %s", err, b)
		default:
			lib = fmt.Sprintf("%8s   peak RSS %d MiB   vh5fs is %.1fx faster", ms(took), librss>>20, float64(took)/float64(d))
		}
	}
	fmt.Printf("  versioned-hdf5 (one run)    %s\n", lib)
	return nil
}
