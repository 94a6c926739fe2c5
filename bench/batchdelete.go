package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"
)

// benchBatchDelete compares deleting n versions with one rmdir each through a read-write
// mount (-o allow_delete; timed from the first rmdir until the daemon has exited after its
// unmount, which is when the deferred reclaim is durable) with one `vh5fs delete` of the
// same versions: time and the file's growth, medians of reps runs on fresh copies, and
// their ratios. The file has a dataset of chunks 1 KiB chunks and nversions versions,
// version k changing chunk k-1 (mod chunks); v1..vn are deleted.
func benchBatchDelete(cache, vh5fs string, reps, chunks, nversions, n int) error {
	if chunks <= 0 || n <= 0 || nversions <= n {
		return nil
	}
	file, err := cached(filepath.Join(cache, fmt.Sprintf("rmdir-%d-%d.h5", chunks, nversions)), func(tmp string) error {
		return run("/usr/bin/python3", "tests/py/make_versioned.py", tmp, "--shape", strconv.Itoa(chunks*chunkElems),
			"--chunks", strconv.Itoa(chunkElems), "--versions", strconv.Itoa(nversions))
	})
	if err != nil {
		return err
	}
	st, err := os.Stat(file)
	if err != nil {
		return err
	}
	names := make([]string, n)
	for k := range names {
		names[k] = "v" + strconv.Itoa(k+1)
	}
	var rmdirs, deletes []time.Duration
	var rmdirGrowth, deleteGrowth []int64
	for range reps {
		d, size, err := rmdirRun(vh5fs, file, names)
		if err != nil {
			return err
		}
		rmdirs, rmdirGrowth = append(rmdirs, d), append(rmdirGrowth, size-st.Size())
		d, size, err = deleteRun(vh5fs, file, names)
		if err != nil {
			return err
		}
		deletes, deleteGrowth = append(deletes, d), append(deleteGrowth, size-st.Size())
	}
	self := func(d time.Duration) time.Duration { return d }
	r, c := median(rmdirs, self), median(deletes, self)
	rg, cg := medianInt(rmdirGrowth), medianInt(deleteGrowth)
	fmt.Printf("\ndelete %d of %d versions (%d chunks, a %.1f MiB file) through a mount, one rmdir each, until the unmount's reclaim is durable, vs one vh5fs delete; medians of %d\n",
		n, nversions, chunks, float64(st.Size())/(1<<20), reps)
	fmt.Printf("  %d rmdirs + unmount %9s  file +%7.1f KiB\n", n, ms(r), float64(rg)/1024)
	fmt.Printf("  vh5fs delete        %9s  file +%7.1f KiB\n", ms(c), float64(cg)/1024)
	growth := "-"
	if cg > 0 {
		growth = fmt.Sprintf("%.2fx", float64(rg)/float64(cg))
	}
	fmt.Printf("  ratio: time %.2fx (target <= 2x), growth %s (target <= 1.2x)\n", float64(r)/float64(c), growth)
	return nil
}

func medianInt(v []int64) int64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// rmdirRun mounts a copy of file with -o rw,allow_delete, removes each named version with
// one rmdir, unmounts and waits for the daemon: the time from the first rmdir, and the
// copy's size.
func rmdirRun(vh5fs, file string, names []string) (time.Duration, int64, error) {
	work, cleanup, err := workCopy(file)
	if err != nil {
		return 0, 0, err
	}
	defer cleanup()
	mnt := filepath.Join(filepath.Dir(work), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		return 0, 0, err
	}
	var log bytes.Buffer
	cmd := exec.Command(vh5fs, "mount", "-o", "rw,allow_delete", work, mnt)
	cmd.Stderr = &log
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	fail := func(err error) (time.Duration, int64, error) {
		exec.Command("fusermount3", "-u", mnt).Run()
		<-done
		return 0, 0, fmt.Errorf("%w; vh5fs logged:\n%s", err, log.Bytes())
	}
	for i := 0; !mounted(mnt); i++ {
		if i == 500 {
			return fail(fmt.Errorf("%s did not mount", work))
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	for _, v := range names {
		if err := syscall.Rmdir(filepath.Join(mnt, "versions", v)); err != nil {
			return fail(fmt.Errorf("rmdir versions/%s: %w", v, err))
		}
	}
	if out, err := exec.Command("fusermount3", "-u", mnt).CombinedOutput(); err != nil {
		return fail(fmt.Errorf("fusermount3 -u: %v: %s", err, out))
	}
	if err := <-done; err != nil {
		return 0, 0, fmt.Errorf("vh5fs mount: %w; it logged:\n%s", err, log.Bytes())
	}
	d := time.Since(start)
	if !bytes.Contains(log.Bytes(), []byte("deletions' chunks reclaimed")) {
		return 0, 0, fmt.Errorf("the mount reclaimed nothing; it logged:\n%s", log.Bytes())
	}
	st, err := os.Stat(work)
	if err != nil {
		return 0, 0, err
	}
	return d, st.Size(), nil
}

// deleteRun runs `vh5fs delete` of names on a copy of file: its time and the copy's size.
func deleteRun(vh5fs, file string, names []string) (time.Duration, int64, error) {
	work, cleanup, err := workCopy(file)
	if err != nil {
		return 0, 0, err
	}
	defer cleanup()
	start := time.Now()
	if out, err := exec.Command(vh5fs, append([]string{"delete", work}, names...)...).CombinedOutput(); err != nil {
		return 0, 0, fmt.Errorf("vh5fs delete: %v: %s", err, out)
	}
	d := time.Since(start)
	st, err := os.Stat(work)
	if err != nil {
		return 0, 0, err
	}
	return d, st.Size(), nil
}
