package main

// The refs command: fsspec reference JSON of a version as a Zarr v2 group (package refs).

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"

	"github.com/vh5fs/vh5fs/refs"
	"github.com/vh5fs/vh5fs/versions"
)

const refsUsage = `usage: vh5fs refs FILE [VERSION] [--at TIME] [--all] [--url URL] [-o OUT.json]

Prints fsspec reference JSON (spec version 1) of VERSION (default: the current version)
as a Zarr v2 group: a .zgroup per group, per dataset a .zarray, a .zattrs (its HDF5
attributes and _ARRAY_DIMENSIONS) and one key per stored chunk, "PATH/i.j" ->
[URL, offset, size] of the chunk's bytes in FILE. Zarr, Dask and xarray then read the
version on any machine without FUSE or libhdf5. A plain HDF5 file gets its own tree.
--all describes every committed version, under versions/NAME/. --url writes URL (e.g.
s3://bucket/run.h5, a copy of FILE) instead of FILE's absolute path. -o writes OUT.json
(replaced only when complete) instead of standard output. --at TIME picks the version
current at TIME (see 'vh5fs help time').
Datasets Zarr cannot read this way (LZF, SZIP and other filters without a numcodecs
codec, types without a byte form) are left out, each with one line on stderr; the exit
status stays 0.
`

// heapLimit is the Go runtime's soft memory limit for log, diff, info and refs, which
// promise to run in 256 MiB on a dataset of ten million chunks: their live heap is one
// version's chunk map (12 bytes a chunk) and at most 4 bytes a chunk more, but walks that
// leave garbage (refs locates 65536 chunks at a time) would let the heap grow to twice
// that before collecting. libhdf5 and the file's mapped pages take the rest.
const heapLimit = 192 << 20

// boundHeap sets heapLimit unless GOMEMLIMIT set a limit.
func boundHeap() {
	if debug.SetMemoryLimit(-1) == math.MaxInt64 {
		debug.SetMemoryLimit(heapLimit)
	}
}

func runRefs(args []string, stdout, stderr io.Writer) int {
	boundHeap()
	fl := flag.NewFlagSet("refs", flag.ContinueOnError)
	at := fl.String("at", "", "the version current at this time")
	all := fl.Bool("all", false, "every committed version, under versions/NAME/")
	url := fl.String("url", "", "the URL written for FILE")
	out := fl.String("o", "", "write to this file instead of standard output")
	ops, code := parseArgs("refs", fl, args, stderr)
	if code >= 0 {
		return code
	}
	switch {
	case len(ops) < 1 || len(ops) > 2:
		return badUsage("refs", stderr, "needs FILE and at most one VERSION")
	case len(ops) == 2 && *at != "":
		return badUsage("refs", stderr, "give VERSION or --at, not both")
	case *all && (len(ops) == 2 || *at != ""):
		return badUsage("refs", stderr, "--all describes every version: give no VERSION or --at")
	}
	file := ops[0]
	f, err := versions.Open(file)
	if err != nil {
		return fail(stderr, file, err)
	}
	defer f.Close()
	opt := refs.Options{All: *all, URL: *url, Warn: func(msg string) { fmt.Fprintf(stderr, "vh5fs: refs: %s: %s\n", file, msg) }}
	if f.Versioned() && !*all {
		name := ""
		if len(ops) == 2 {
			name = ops[1]
		}
		if opt.Version, err = resolveVersion(f, name, *at); err != nil {
			return fail(stderr, file, err)
		}
	} else if !f.Versioned() && (len(ops) == 2 || *at != "" || *all) {
		return fail(stderr, file, errors.New("not a versioned-hdf5 file (no _version_data): it has no versions, only its plain tree"))
	}
	if *out == "" {
		if _, err := refs.Write(stdout, f, opt); err != nil {
			return fail(stderr, file, err)
		}
		return 0
	}
	if err := writeRefsFile(*out, f, opt); err != nil {
		return fail(stderr, file, err)
	}
	return 0
}

// writeRefsFile writes the document to a temporary file beside path and renames it over
// path once complete, so a failure leaves no partial document. A symbolic link's target is
// replaced (the link stays), and a path that is no regular file (/dev/null, a pipe) is
// written in place: renaming over it would replace a device with a file.
func writeRefsFile(path string, f *versions.File, opt refs.Options) error {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("%s is a directory", path)
	} else if err == nil && !st.Mode().IsRegular() {
		out, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		if _, err := refs.Write(out, f, opt); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename: nothing to remove
	if _, err := refs.Write(tmp, f, opt); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
