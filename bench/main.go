// Command bench measures vh5fs and prints one table of medians and ratios against the
// references named in the project's issues. It builds the files it needs (with
// tests/py/make_versioned.py, Debian's h5py) into a cache directory.
//
//	go run ./bench [-suite commit] [-cache DIR] [-reps N] [-sizes 1000,10000,100000] [-layouts gzip]
//	go run ./bench -suite stage [-reps N] [-stage-datasets 10] [-stage-chunks 10000]
//
// Suite "bounded" (bench/bounded.go): fsck, info, ls, log, diff, delete -n and refs on a
// dataset of -bounded-chunks one-byte chunks: time and peak RSS against 256 MiB.
//
// Suite "commit": commit 1 and 100 changed chunks into a dataset of 1k, 10k and 100k chunks
// (1 KiB each) in files with 10 and 1000 prior versions; the time of each phase (plan and
// hashing, raw_data writes, hash_table rows, the version group with its virtual dataset,
// flush+fsync) and the total, against versioned-hdf5's time for one changed chunk.
//
// Suite "stage" (bench/stage.go): on a version holding -stage-datasets datasets d0, d1, ...
// of -stage-chunks chunks (1 KiB, float64, nothing deduplicates), stages (package stage,
// driven in process) that write 1 or 100 chunks into one dataset, and into every dataset,
// each committed as one version; the phases as in "commit", and per count of written
// chunks the ratio of the two totals against its target: a stage changing 10
// datasets of 10k chunks commits in at most 1.5x the time of one changing one of them.
//
// Suite "cache" (bench/cache.go): the decoded cache (-o cache) against the page cache and
// go-fuse's loopback with and without passthrough, hot and cold versions, uncompressed and
// gzip+shuffle, and the first read's cost while the cache fills against -old-vh5fs (a build
// without the cache), alternating. -cache-mib and -cache-reps size it.
//
// Suite "write" (bench/write.go): dd and cp through a read-write mount against a plain dd
// to the same filesystem, the daemon's peak RSS, gzip+shuffle raw_data throughput, the
// latency of another version's readers during a commit and small writes (dd bs=4K).
// -write-sizes, -cp-sizes, -gzip-size, -lat-size and -small-size (MiB) give the sizes;
// "-write-reps 1 -write-sizes 64 -cp-sizes 16,64 -gzip-size 32 -lat-size 64 -small-size
// 16" is a quick run.
package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vh5fs/vh5fs/commit"
	"github.com/vh5fs/vh5fs/versions"
)

// versionedHDF5Commit is versioned-hdf5's time to commit one changed chunk into a dataset
// of n chunks on this kind of machine (from the commit issue).
var versionedHDF5Commit = map[int]time.Duration{1000: 130 * time.Millisecond, 10000: time.Second, 100000: 12 * time.Second}

const chunkElems = 128 // float64: 1 KiB chunks

func main() {
	suite := flag.String("suite", "all", "which suite to run: all, reads, latency, commit, stage, refs, write, manage, bounded; cache (not in all)")
	size := flag.Int64("size", 1<<30, "bytes of each read-suite dataset")
	vh5fs := flag.String("vh5fs", "bin/vh5fs", "the vh5fs binary")
	src := flag.String("src", "", "loopback-serve: the directory to serve")
	keep := flag.Bool("keep", false, "keep every generated read-suite file (several GiB) for the next run")
	layouts := flag.String("layouts", "", "read suite: only the layouts whose name contains this, e.g. gzip")
	cache := flag.String("cache", filepath.Join(os.TempDir(), "vh5fs-bench"), "where generated files are kept")
	reps := flag.Int("reps", 5, "commits measured per configuration (after a first, cold one)")
	sizes := flag.String("sizes", "1000,10000,100000", "dataset sizes in chunks")
	histories := flag.String("history", "10,1000", "prior versions")
	stageDatasets := flag.Int("stage-datasets", 10, "stage suite: datasets in the version stages change")
	stageChunks := flag.Int("stage-chunks", 10000, "stage suite: chunks of each dataset")
	writeSizes := flag.String("write-sizes", "1024,4096", "write suite: MiB of each dd over a version")
	cpSizes := flag.String("cp-sizes", "64,256,1024,4096", "write suite: MiB of each cp over a dataset")
	gzipSize := flag.Int("gzip-size", 256, "write suite: MiB of the gzip+shuffle row (0: none)")
	latSize := flag.Int("lat-size", 1024, "write suite: MiB of the commit during which readers are probed (0: none)")
	small := flag.Int("small-size", 256, "write suite: MiB of each dd bs=4K over a version, uncompressed and gzip+shuffle (0: none)")
	writeReps := flag.Int("write-reps", 3, "write suite: runs per row")
	compactSize := flag.Int("compact-size", 4096, "manage suite: MiB of live raw_data chunks in the file compacted (0: none)")
	deleteChunks := flag.Int("delete-chunks", 10000, "manage suite: chunks of the dataset whose versions are deleted (0: none)")
	deleteVersions := flag.Int("delete-versions", 1000, "manage suite: versions of the file versions are deleted from")
	rmdirChunks := flag.Int("rmdir-chunks", 20, "manage suite: chunks of the dataset whose versions are deleted one rmdir each (0: none)")
	rmdirVersions := flag.Int("rmdir-versions", 400, "manage suite: versions of the file versions are deleted from one rmdir each")
	rmdirCount := flag.Int("rmdir-count", 50, "manage suite: versions deleted one rmdir each (v1 to vN)")
	modifySize := flag.Int("modify-size", 1024, "manage suite: MiB of the dataset vh5fs modify rechunks (0: none)")
	deleteLibTimeout := flag.Duration("delete-lib-timeout", 10*time.Minute, "manage suite: when versioned-hdf5's delete_versions is stopped")
	modifyLibTimeout := flag.Duration("modify-lib-timeout", 30*time.Minute, "manage suite: when versioned-hdf5's modify_metadata is stopped")
	boundedChunks := flag.Int("bounded-chunks", 10_000_000, "bounded suite: chunks of the dataset each command reads (0: none)")
	boundedTimeout := flag.Duration("bounded-timeout", 10*time.Minute, "bounded suite: when a command is stopped")
	oldVh5fs := flag.String("old-vh5fs", "", "cache suite: a vh5fs binary without the decoded cache, whose first read the fill's cost is measured against (empty: that row is left out)")
	cacheMiB := flag.Int("cache-mib", 256, "cache suite: MiB of the dataset")
	cacheReps := flag.Int("cache-reps", 5, "cache suite: rounds")
	cacheFillOnly := flag.Bool("cache-fill-only", false, "cache suite: only the first read's cost while the cache fills (needs -old-vh5fs)")
	flag.Parse()
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := os.MkdirAll(*cache, 0o755); err != nil {
		fatal(err)
	}
	switch *suite {
	case "loopback-serve": // internal: the FUSE-ceiling reference mount
		if err := serveLoopback(*src, flag.Arg(0)); err != nil {
			fatal(err)
		}
	case "loopback-passthrough-serve": // internal: the loopback with FUSE passthrough
		if err := serveLoopbackPassthrough(*src, flag.Arg(0)); err != nil {
			fatal(err)
		}
	case "cache": // not in "all": it wants -old-vh5fs, a build of the commit before the cache
		if err := benchCache(*cache, *vh5fs, *oldVh5fs, *cacheMiB, *cacheReps, *cacheFillOnly); err != nil {
			fatal(err)
		}
	case "all", "reads", "latency", "commit", "stage", "refs", "write", "manage", "bounded":
		if *suite == "all" || *suite == "reads" {
			if err := benchReads(*cache, *size, *reps, *vh5fs, *keep, *layouts); err != nil {
				fatal(err)
			}
		}
		if *suite == "all" || *suite == "latency" {
			if err := benchLatency(*cache, *vh5fs, *reps, *size); err != nil {
				fatal(err)
			}
		}
		if *suite == "all" || *suite == "commit" {
			if err := benchCommit(*cache, *reps, ints(*sizes), ints(*histories)); err != nil {
				fatal(err)
			}
		}
		if *suite == "all" || *suite == "stage" {
			if err := benchStage(*cache, *reps, *stageDatasets, *stageChunks); err != nil {
				fatal(err)
			}
		}
		if *suite == "all" || *suite == "refs" {
			if err := benchRefs(*cache, *size, *reps, *vh5fs, *layouts); err != nil {
				fatal(err)
			}
		}
		if *suite == "all" || *suite == "write" {
			o := writeOptions{vh5fs: *vh5fs, cache: *cache, reps: *writeReps, ddSizes: ints(*writeSizes),
				cpSizes: ints(*cpSizes), gzipSize: *gzipSize, latSize: *latSize, small: *small}
			if err := benchWrite(o); err != nil {
				fatal(err)
			}
		}
		if *suite == "all" || *suite == "manage" {
			if err := benchManage(*cache, *vh5fs, *writeReps, *compactSize); err != nil {
				fatal(err)
			}
			if err := benchDelete(*cache, *vh5fs, *writeReps, *deleteChunks, *deleteVersions, *deleteLibTimeout); err != nil {
				fatal(err)
			}
			if err := benchBatchDelete(*cache, *vh5fs, *writeReps, *rmdirChunks, *rmdirVersions, *rmdirCount); err != nil {
				fatal(err)
			}
			if err := benchModify(*cache, *vh5fs, *writeReps, *modifySize, *modifyLibTimeout); err != nil {
				fatal(err)
			}
		}
		if *suite == "all" || *suite == "bounded" {
			if err := benchBounded(*cache, *vh5fs, *boundedChunks, *boundedTimeout); err != nil {
				fatal(err)
			}
		}
	default:
		fatal(fmt.Errorf("unknown suite %q", *suite))
	}
}

func benchCommit(cache string, reps int, sizes, histories []int) error {
	fmt.Printf("commit: median of %d commits after a cold first one; 1 KiB chunks\n", reps)
	fmt.Printf("%-8s %-8s %-7s | %s | %9s %9s | %12s\n",
		"chunks", "history", "changed", phaseHeader, "total", "cold", "vs v-hdf5")
	for _, n := range sizes {
		for _, h := range histories {
			file, err := generate(cache, n, h)
			if err != nil {
				return err
			}
			for _, k := range []int{1, 100} {
				rows, cold, err := commitRuns(file, n, k, reps)
				if err != nil {
					return err
				}
				phases, total := phaseMedians(rows)
				ratio := "-"
				if ref, ok := versionedHDF5Commit[n]; ok && k == 1 {
					ratio = fmt.Sprintf("%.3fx", float64(total)/float64(ref))
				}
				fmt.Printf("%-8d %-8d %-7d | %s | %9s %9s | %12s\n", n, h, k, phases, ms(total), ms(cold), ratio)
			}
		}
	}
	fmt.Println("vs v-hdf5: total / versioned-hdf5's time for one changed chunk (0.13 s, 1 s, 12 s at 1k, 10k, 100k chunks)")
	return nil
}

// commitRuns copies file, then commits k changed chunks reps+1 times on one open file,
// returning the warm results and the first (cold: loads the chunk map and hash table).
func commitRuns(file string, n, k, reps int) ([]commit.Result, time.Duration, error) {
	work, cleanup, err := workCopy(file)
	if err != nil {
		return nil, 0, err
	}
	defer cleanup()
	f, err := versions.OpenRW(work)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	c, err := commit.Open(f, commit.Options{})
	if err != nil {
		return nil, 0, err
	}
	defer c.Close()
	base, err := f.CurrentVersion()
	if err != nil {
		return nil, 0, err
	}
	rng := rand.New(rand.NewSource(int64(n*1000 + k)))
	var out []commit.Result
	var cold time.Duration
	for i := 0; i <= reps; i++ {
		start := time.Now()
		d, err := f.Dataset(versions.VersionsGroup + "/" + base + "/data")
		if err != nil {
			return nil, 0, err
		}
		arr, err := commit.NewStaged(d)
		if err != nil {
			return nil, 0, err
		}
		buf := make([]byte, chunkElems*8)
		for j := 0; j < k; j++ {
			rng.Read(buf)
			chunk := rng.Intn(n)
			if _, err := arr.WriteAt(buf, int64(chunk)*int64(len(buf)), d.ChunkSource()); err != nil {
				return nil, 0, err
			}
		}
		res, err := c.Commit(commit.Change{Base: base, Dataset: "data", Array: arr})
		if err != nil {
			return nil, 0, err
		}
		base = res.Name
		if i == 0 {
			cold = time.Since(start)
			continue
		}
		out = append(out, res)
	}
	return out, cold, nil
}

// generate makes (once) a file whose current version holds a dataset of n chunks after h
// prior versions.
func generate(cache string, n, h int) (string, error) {
	return cached(filepath.Join(cache, fmt.Sprintf("commit-%d-%d.h5", n, h)), func(tmp string) error {
		return run("/usr/bin/python3", "tests/py/make_versioned.py", tmp,
			"--shape", strconv.Itoa(n*chunkElems), "--chunks", strconv.Itoa(chunkElems), "--history", strconv.Itoa(h-1))
	})
}

// cached returns file, made first by build (writing the temporary path it is given,
// renamed to file once build succeeds) unless an earlier run made it.
func cached(file string, build func(tmp string) error) (string, error) {
	if _, err := os.Stat(file); err == nil {
		return file, nil
	}
	fmt.Fprintf(os.Stderr, "generating %s ...\n", file)
	tmp := file + ".tmp"
	if err := build(tmp); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("generating %s: %w", file, err)
	}
	return file, os.Rename(tmp, file)
}

// workCopy copies file into a new temporary directory, which cleanup removes.
func workCopy(file string) (work string, cleanup func(), err error) {
	tmp, err := os.MkdirTemp("", "vh5fs-bench-run")
	if err != nil {
		return "", nil, err
	}
	work = filepath.Join(tmp, "data.h5")
	if err := copyFile(file, work); err != nil {
		os.RemoveAll(tmp)
		return "", nil, err
	}
	return work, func() { os.RemoveAll(tmp) }, nil
}

// phaseHeader heads the columns phaseMedians prints.
var phaseHeader = fmt.Sprintf("%9s %9s %9s %9s %9s", "plan", "data", "table", "group", "sync")

// phaseMedians formats the median of each phase of rows (under phaseHeader) and returns
// the median total (Elapsed).
func phaseMedians(rows []commit.Result) (string, time.Duration) {
	var cols []string
	for _, f := range []func(commit.Result) time.Duration{
		func(r commit.Result) time.Duration { return r.Plan },
		func(r commit.Result) time.Duration { return r.Data },
		func(r commit.Result) time.Duration { return r.Table },
		func(r commit.Result) time.Duration { return r.Group },
		func(r commit.Result) time.Duration { return r.Sync },
	} {
		cols = append(cols, fmt.Sprintf("%9s", ms(median(rows, f))))
	}
	return strings.Join(cols, " "), median(rows, func(r commit.Result) time.Duration { return r.Elapsed })
}

// median is the median of f over rows (the upper one of an even count).
func median[T any](rows []T, f func(T) time.Duration) time.Duration {
	ds := make([]time.Duration, len(rows))
	for i, r := range rows {
		ds[i] = f(r)
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/1e6) }

func ints(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if v, err := strconv.Atoi(strings.TrimSpace(f)); err == nil {
			out = append(out, v)
		}
	}
	return out
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}
