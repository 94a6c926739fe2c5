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
why not (strings, datasets without a chunk map, too large for the cache). Entries are named
by content: every version, and every file, with the same bytes shares one.
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
	c, err := decoded.Open(cacheDir, cfg.CacheBytes())
	if err != nil {
		return fail(stderr, file, err)
	}
	defer c.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	failed := false
	for _, p := range paths {
		msg, err := warmOne(ctx, c, f, versions.VersionsGroup+"/"+version+"/"+p)
		if err != nil {
			fmt.Fprintf(stderr, "vh5fs: %s: %s/%s: %v\n", file, version, p, err)
			failed = true
			if ctx.Err() != nil {
				break
			}
			continue
		}
		fmt.Fprintf(stdout, "%s/%s: %s\n", version, p, msg)
	}
	if failed {
		return 1
	}
	return 0
}

// warmOne fills the entry of the dataset at path and says what it did.
func warmOne(ctx context.Context, c *decoded.Cache, f *versions.File, path string) (string, error) {
	d, err := f.Dataset(path)
	if err != nil {
		return "", err
	}
	key, ok, err := d.ContentKey()
	switch {
	case err != nil:
		return "", err
	case !ok:
		return "not cacheable (no chunk map named by the hash table)", nil
	case c.Has(decoded.Key(key), d.Size()):
		return "already cached", nil
	}
	err = c.Fill(ctx, decoded.Key(key), d.Size(), io.NewSectionReader(d, 0, d.Size()))
	if errors.Is(err, decoded.ErrTooLarge) {
		return fmt.Sprintf("not cached: %d bytes, more than the cache's %d", d.Size(), c.Limit()), nil
	}
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("filled, %d bytes", d.Size()), nil
}
