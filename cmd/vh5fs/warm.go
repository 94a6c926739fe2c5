package main

// vh5fs warm: fill the decoded cache ahead of the reads, as a mount with -o cache does
// after a version's first whole read.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/vh5fs/vh5fs/decoded"
	"github.com/vh5fs/vh5fs/mountopts"
	"github.com/vh5fs/vh5fs/versions"
)

const warmUsage = `usage: vh5fs warm FILE [VERSION] [DATASET] [--cache DIR] [--cache-size SIZE]

Fills the decoded cache with VERSION's datasets (default: the current version), or with
DATASET alone, so that mounts with -o cache serve them at page-cache speed from their first
open. --cache and --cache-size are the mount options cache=DIR and cache_size=SIZE (default:
vh5fs/ in the user's cache directory, 2G). One line per dataset: filled, already cached, or
why not (strings, datasets without a chunk map, too large for the cache, no room beside the
run's other datasets), and how many entries of what size its fill evicted; a first line
says what a --cache-size smaller than the directory holds evicted. A run evicts none of
the entries it fills or finds. Entries are named by content: every version, and every
file, with the same bytes shares one.
`

func runWarm(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("warm", flag.ContinueOnError)
	dir := fl.String("cache", "", "the cache directory (absolute)")
	size := fl.String("cache-size", "", "the cache's size: bytes, or K, M, G")
	ops, code := parseArgs("warm", fl, args, stderr)
	if code >= 0 {
		return code
	}
	if len(ops) < 1 || len(ops) > 3 {
		return badUsage("warm", stderr, "needs FILE, and at most VERSION and DATASET")
	}
	opts := []string{"cache"}
	if *dir != "" {
		opts = append(opts, "cache="+*dir)
	}
	if *size != "" {
		opts = append(opts, "cache_size="+*size)
	}
	cfg, err := mountopts.Parse(opts...)
	if err != nil {
		return badUsage("warm", stderr, "%v", err)
	}
	cacheDir, err := cfg.CacheDirectory()
	if err != nil {
		return badUsage("warm", stderr, "%v", err)
	}
	file := ops[0]
	f, err := openVersioned(file)
	if err != nil {
		return fail(stderr, file, err)
	}
	defer f.Close()
	name := ""
	if len(ops) > 1 {
		name = ops[1]
	}
	version, err := resolveVersion(f, name, "")
	if err != nil {
		return fail(stderr, file, err)
	}
	paths, err := f.DatasetPaths(version)
	if err != nil {
		return fail(stderr, file, err)
	}
	if len(ops) == 3 {
		if !slices.Contains(paths, ops[2]) {
			return fail(stderr, file, fmt.Errorf("version %s has no dataset %s", version, ops[2]))
		}
		paths = []string{ops[2]}
	}
	// Evictions are said where they happen: at the open (a --cache-size smaller than the
	// directory holds) and at the fill that made room.
	var evicted []decoded.Eviction
	c, err := decoded.Open(cacheDir, cfg.CacheBytes(), decoded.OnEvict(func(e decoded.Eviction) { evicted = append(evicted, e) }))
	if err != nil {
		return fail(stderr, file, err)
	}
	defer c.Close()
	if len(evicted) > 0 {
		fmt.Fprintf(stdout, "cache: %s evicted to fit in %s\n", evictionText(evicted), byteSize(c.Limit()))
		evicted = nil
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The entries already there are kept first, so that no fill of this run evicts one of
	// them (which would make its "already cached" untrue), nor one it filled.
	jobs := make([]warmJob, len(paths))
	for i, p := range paths {
		jobs[i] = planWarm(c, f, versions.InVersion(version, p))
	}
	failed := false
	for i, p := range paths {
		msg, err := jobs[i].run(ctx, c, f)
		if err != nil {
			fmt.Fprintf(stderr, "vh5fs: %s: %s/%s: %v\n", file, version, p, err)
			failed = true
			if ctx.Err() != nil {
				break
			}
			continue
		}
		if len(evicted) > 0 {
			msg += "; " + evictionText(evicted) + " evicted to make room"
			evicted = nil
		}
		fmt.Fprintf(stdout, "%s/%s: %s\n", version, p, msg)
	}
	if failed {
		return 1
	}
	return 0
}

// evictionText is "1 entry of 256.0 MiB" or "3 entries, 300.0 MiB": entries are named by
// content, not by a dataset.
func evictionText(es []decoded.Eviction) string {
	var total int64
	for _, e := range es {
		total += e.Size
	}
	if len(es) == 1 {
		return "1 entry of " + byteSize(total)
	}
	return fmt.Sprintf("%d entries, %s", len(es), byteSize(total))
}

// warmJob is one dataset to warm: its entry, or why it has none. It holds no Dataset:
// versions.File lets go of those it keeps as its budget says.
type warmJob struct {
	path   string
	key    decoded.Key
	ok     bool  // it has a content key
	cached bool  // its entry was complete before this run filled anything
	err    error // naming it failed
}

// planWarm names the entry of the dataset at path and keeps it if it is complete.
func planWarm(c *decoded.Cache, f *versions.File, path string) warmJob {
	j := warmJob{path: path}
	d, err := f.Dataset(path)
	if err != nil {
		j.err = err
		return j
	}
	var key [32]byte
	key, j.ok, j.err = d.ContentKey()
	j.key = decoded.Key(key)
	if j.err == nil && j.ok && c.Has(j.key, d.Size()) {
		j.cached = true
		c.Keep(j.key)
	}
	return j
}

// run fills the job's entry and says what it did.
func (j warmJob) run(ctx context.Context, c *decoded.Cache, f *versions.File) (string, error) {
	switch {
	case j.err != nil:
		return "", j.err
	case !j.ok:
		return "not cacheable (no chunk map named by the hash table)", nil
	case j.cached:
		return "already cached", nil
	}
	d, err := f.Dataset(j.path)
	if err != nil {
		return "", err
	}
	size := d.Size()
	err = c.Fill(ctx, j.key, size, io.NewSectionReader(d, 0, size))
	switch {
	case errors.Is(err, decoded.ErrTooLarge) && size > c.Limit():
		return fmt.Sprintf("not cached: %d bytes, more than the cache's %d", size, c.Limit()), nil
	case errors.Is(err, decoded.ErrTooLarge):
		return fmt.Sprintf("not cached: %d bytes; the cache's %d hold this run's other datasets (and fills under way)", size, c.Limit()), nil
	case err != nil:
		return "", err
	}
	c.Keep(j.key)
	return fmt.Sprintf("filled, %d bytes", size), nil
}
