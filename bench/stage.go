package main

import (
	"cmp"
	"fmt"
	"math/rand"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/vh5fs/vh5fs/commit"
	"github.com/vh5fs/vh5fs/fsck"
	"github.com/vh5fs/vh5fs/mountopts"
	"github.com/vh5fs/vh5fs/stage"
	"github.com/vh5fs/vh5fs/versions"
)

// stageTarget is the stage suite's target: a stage changing every dataset commits in at most
// this multiple of the time of a stage changing one of them.
const stageTarget = 1.5

// benchStage commits stages of a file whose version holds datasets datasets of n chunks:
// stages changing one dataset, and stages changing all of them, by k written chunks
// each, and prints each configuration's phases and the ratio of the two totals. The two
// configurations run on copies of their own, alternating, so that both see the same load
// of a shared machine.
func benchStage(cache string, reps, datasets, n int) error {
	if reps < 1 || datasets < 1 || n < 1 {
		return fmt.Errorf("stage suite: -reps, -stage-datasets and -stage-chunks must be at least 1")
	}
	file, err := generateStage(cache, datasets, n)
	if err != nil {
		return err
	}
	fmt.Printf("\nstage: a stage committed as one version (commit.CommitTree, via stage.Manager.Commit) on a version of %d float64\n", datasets)
	fmt.Printf("datasets of %d chunks (1 KiB each); k chunks of random data written into each changed dataset at spread offsets;\n", n)
	fmt.Printf("median of %d commits after a cold first one; each configuration on a fresh copy of the file, the two of a k alternating\n", reps)
	fmt.Printf("%-8s %-5s | %s | %9s %9s %9s %9s\n", "changed", "k", phaseHeader, "total", "other", "wall", "cold")
	var ratios []string
	for _, k := range []int{1, 100} {
		k = min(k, n)
		one, err := newStageRun(file, 1, n, k)
		if err != nil {
			return err
		}
		defer one.close()
		all, err := newStageRun(file, datasets, n, k)
		if err != nil {
			return err
		}
		defer all.close()
		for i := 0; i <= reps; i++ {
			if err := one.step(); err != nil {
				return err
			}
			if err := all.step(); err != nil {
				return err
			}
		}
		var totals [2]time.Duration
		for i, r := range []*stageRun{one, all} {
			phases, total := phaseMedians(r.rows)
			other := median(r.rows, func(r commit.Result) time.Duration {
				return r.Elapsed - r.Plan - r.Data - r.Table - r.Group - r.Sync
			})
			wall := median(r.walls, func(d time.Duration) time.Duration { return d })
			fmt.Printf("%-8d %-5d | %s | %9s %9s %9s %9s\n", r.changed, k, phases, ms(total), ms(other), ms(wall), ms(r.cold))
			totals[i] = total
		}
		ratio := float64(totals[1]) / float64(totals[0])
		pairs := make([]float64, reps)
		for i := range pairs {
			pairs[i] = float64(all.rows[i].Elapsed) / float64(one.rows[i].Elapsed)
		}
		fastest := func(r *stageRun) time.Duration {
			return slices.MinFunc(r.rows, func(a, b commit.Result) int { return cmp.Compare(a.Elapsed, b.Elapsed) }).Elapsed
		}
		verdict := "met"
		if ratio > stageTarget {
			verdict = "MISSED"
		}
		ratios = append(ratios, fmt.Sprintf("k=%d: %d datasets / 1 dataset = %.2fx total (back to back, median of the ratios: %.2fx; fastest over fastest: %.2fx); target <= %.1fx: %s",
			k, datasets, ratio, mid(pairs), float64(fastest(all))/float64(fastest(one)), stageTarget, verdict))
		one.close()
		all.close()
	}
	for _, l := range ratios {
		fmt.Println(l)
	}
	fmt.Println("total: commit.Result.Elapsed (CommitTree); other: total less the five phases (time no phase reports: in a stage")
	fmt.Println("of several datasets, data and table are the last dataset's appendChunks only, the others' land here);")
	fmt.Println("wall: stage.Manager.Commit as called (tree walk, CommitTree, the stage's files removed); cold: the first stage's")
	fmt.Println("create, opens, writes and commit (chunk maps and hash tables loaded). The verdict takes the ratio of the medians;")
	fmt.Println("on a loaded machine the fastest commits' ratio is the steadier figure.")
	return nil
}

// stageRun commits stages, one a step, on a copy of a file opened as a read-write mount
// opens it, each stage on the version the one before made and changing datasets
// d0..d(changed-1) by k chunks each.
type stageRun struct {
	changed, n, k int
	m             *stage.Manager
	closers       []func() error
	rng           *rand.Rand
	steps         int
	rows          []commit.Result // the warm commits
	walls         []time.Duration // their Manager.Commit calls
	cold          time.Duration   // the first stage: create, opens, writes, commit
}

func newStageRun(file string, changed, n, k int) (r *stageRun, err error) {
	r = &stageRun{changed: changed, n: n, k: k, rng: rand.New(rand.NewSource(int64(changed*1000 + k)))}
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	work, cleanup, err := workCopy(file)
	if err != nil {
		return nil, err
	}
	r.closers = append(r.closers, func() error { cleanup(); return nil })
	f, err := versions.OpenRW(work)
	if err != nil {
		return nil, err
	}
	r.closers = append(r.closers, f.Close)
	c, err := commit.Open(f, commit.Options{StageMem: mountopts.DefaultStageMem}) // as a read-write mount's
	if err != nil {
		return nil, err
	}
	r.closers = append(r.closers, func() error { c.Close(); return nil })
	if r.m, err = stage.Open(c); err != nil {
		return nil, err
	}
	r.closers = append(r.closers, r.m.Close)
	return r, nil
}

// close closes what newStageRun opened, last first, and removes the copy; once.
func (r *stageRun) close() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
	r.closers = nil
}

// step makes a stage, writes into it and commits it: the first step is the cold one.
func (r *stageRun) step() error {
	i := r.steps
	r.steps++
	start := time.Now()
	name := fmt.Sprintf("bench-%d", i)
	st, err := r.m.Create(name)
	if err != nil {
		return err
	}
	buf := make([]byte, chunkElems*8)
	for j := 0; j < r.changed; j++ {
		d, err := st.Open(fmt.Sprintf("d%d", j))
		if err != nil {
			return err
		}
		for w := 0; w < r.k; w++ {
			r.rng.Read(buf)
			chunk := (w*r.n/r.k + i) % r.n
			if _, err := d.WriteAt(buf, int64(chunk)*int64(len(buf))); err != nil {
				return err
			}
		}
	}
	t0 := time.Now()
	res, err := r.m.Commit(name, "")
	if err != nil {
		return err
	}
	wall := time.Since(t0)
	if res.Written != r.changed*r.k {
		return fmt.Errorf("stage %s: wrote %d chunks, not %d", name, res.Written, r.changed*r.k)
	}
	if i == 0 {
		r.cold = time.Since(start)
		return nil
	}
	r.rows, r.walls = append(r.rows, res), append(r.walls, wall)
	return nil
}

// generateStage makes (once) a file whose one version v0 holds datasets d0, d1, ... of n
// chunks of chunkElems float64 each, all values distinct (nothing deduplicates), laid out
// as tests/py/make_versioned.py lays out its one dataset, and checked by fsck.
func generateStage(cache string, datasets, n int) (string, error) {
	return cached(filepath.Join(cache, fmt.Sprintf("stage-%d-%d.h5", datasets, n)), func(tmp string) error {
		if err := run("/usr/bin/python3", "-c", makeStageScript, tmp, strconv.Itoa(datasets), strconv.Itoa(n), strconv.Itoa(chunkElems)); err != nil {
			return err
		}
		findings, err := fsck.Check(tmp)
		if err != nil {
			return err
		}
		if len(findings) > 0 {
			return fmt.Errorf("fsck of %s:\n%s", tmp, fsck.Summary(findings))
		}
		return nil
	})
}

// makeStageScript writes OUT DATASETS CHUNKS CHUNK_ELEMS: make_versioned.py's layout
// (data_version 4, __first_version__, raw_data with a chunks attribute, an LZF hash_table
// of (sha256 of the chunk's bytes and shape suffix, slot extent) rows with largest_index,
// a virtual dataset with one mapping per chunk and raw_data/chunks attributes) for each
// of the datasets dD, D = 0..DATASETS-1, whose element i is D * size + i.
const makeStageScript = `import hashlib, sys
from datetime import datetime, timedelta, timezone
import h5py, numpy as np

out, ndatasets, nchunks, ce = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
t0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
stamp = lambda t: t.strftime("%Y-%m-%d %H:%M:%S.%f%z")
size = nchunks * ce
hdt = np.dtype([("hash", "u1", (32,)), ("shape", "<i8", (2,))])
names = ["d%d" % d for d in range(ndatasets)]
with h5py.File(out, "w", libver=("earliest", "v110")) as f:
    vd = f.create_group("_version_data")
    versions = vd.create_group("versions")
    versions.attrs["data_version"] = np.int64(4)
    versions.create_group("__first_version__").attrs["timestamp"] = stamp(t0)
    for d, name in enumerate(names):
        grp = vd.create_group(name)
        data = np.arange(d * size, (d + 1) * size, dtype="<f8")
        raw = grp.create_dataset("raw_data", shape=(size,), maxshape=(None,), chunks=(ce,), dtype="<f8",
                                 fillvalue=np.float64(0))
        raw[...] = data
        raw.attrs["chunks"] = np.array([ce], dtype=np.int64)
        blocks = data.reshape(nchunks, ce)
        suffix = b"(%d,)" % ce
        rows = np.zeros(nchunks, dtype=hdt)
        rows["hash"] = np.frombuffer(b"".join(hashlib.sha256(b.tobytes() + suffix).digest() for b in blocks),
                                     "u1").reshape(nchunks, 32)
        rows["shape"][:, 0] = np.arange(nchunks, dtype=np.int64) * ce
        rows["shape"][:, 1] = rows["shape"][:, 0] + ce
        ht = grp.create_dataset("hash_table", shape=(nchunks,), maxshape=(None,), chunks=(4096,), dtype=hdt,
                                compression="lzf")
        ht[:] = rows
        ht.attrs["largest_index"] = np.int64(nchunks)
    g = versions.create_group("v0")
    g.attrs["prev_version"] = "__first_version__"
    g.attrs["committed"] = np.bool_(True)
    g.attrs["timestamp"] = stamp(t0 + timedelta(seconds=1))
    for name in names:
        raw_path = "/_version_data/%s/raw_data" % name
        layout = h5py.VirtualLayout(shape=(size,), dtype="<f8", maxshape=(size,))
        src = h5py.VirtualSource(".", raw_path, shape=(size,))
        for k in range(nchunks):
            layout[k * ce:(k + 1) * ce] = src[k * ce:(k + 1) * ce]
        ds = g.create_virtual_dataset(name, layout, fillvalue=np.float64(0))
        ds.attrs["raw_data"] = raw_path
        ds.attrs["chunks"] = np.array([ce], dtype=np.int64)
    versions.attrs["current_version"] = "v0"
`
