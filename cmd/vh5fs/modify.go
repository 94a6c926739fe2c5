package main

// vh5fs modify: versioned-hdf5's modify_metadata from the command line.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/vh5fs/vh5fs/history"
	"github.com/vh5fs/vh5fs/modify"
)

func init() {
	commands["modify"] = command{`usage: vh5fs modify FILE DATASET [--chunks R[,C...]] [--compression gzip[=N]|lzf|none]
                    [--shuffle|--no-shuffle] [--dtype DTYPE] [--fillvalue V] [-n] [--force]

Changes how DATASET (a path inside the versions, e.g. grp/ds) is stored, in every version
that holds it, as versioned-hdf5's modify_metadata does: each version is read and written
again under the new chunk shape, compression, shuffle, dtype (e.g. <f4; numpy's casts) or
fill value (elements equal to the old fill value take the new one), deduplicated into a
new raw_data and hash_table; versions read as before otherwise. The dataset's attributes
are kept (versioned-hdf5 drops them). Options not given keep their setting; gzip without
a level is level 4, as in h5py.

Memory stays bounded (one row of new chunks per core at a time); the rewrite happens in
one journaled sync: a crash leaves the old file, or the new one once recovered (the next
read-write open, or vh5fs fsck --repair). The old storage's space stays in the file until
vh5fs compact. Refused while another program has FILE open (a mount, read-only too, or
h5py) or stages are kept beside it, and for variable-length string datasets.

Prints the new chunks of each version and in total; ends with the file's size before and
after, measured, and the bytes of the old storage (raw_data and hash_table chunks,
mapping lists) that vh5fs compact gives back. A rewrite that gives a version more than
100000 chunks (and more than it had) is refused without --force: each chunk is one
mapping of the version's virtual dataset, and libhdf5 1.10, as h5py and versioned-hdf5
use it, needs about 25 KiB of memory per mapping to open a version (2.5 GiB for 100000
mappings; 1000000 did not open in 19 GiB). So is, before anything is read, the rewrite
of a dataset one of whose versions has more than 100000 chunks already: libhdf5 decodes
the mappings a rewrite replaces, about 6 KiB a chunk.

  -n       print what would change and cost: the new chunks, the estimated growth of
           the file (the new chunks, hash-table rows, chunk index, mapping lists and
           headers) and what compact would give back; write nothing. The new slots are
           counted from every version's chunk map, and a sample of new chunks (a few MiB
           read) says how the new filters compress them and how many hold equal data;
           within 25% of the real growth on the test files
  --force  rewrite past the limit of chunks per version
`, runModify}
}

func runModify(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("modify", flag.ContinueOnError)
	chunks := fl.String("chunks", "", "new chunk shape, one number per axis: R[,C...]")
	comp := fl.String("compression", "", "gzip[=LEVEL], lzf or none")
	shuffle := fl.Bool("shuffle", false, "shuffle the bytes of elements before compressing")
	noShuffle := fl.Bool("no-shuffle", false, "no shuffle filter")
	dtype := fl.String("dtype", "", "new numpy dtype, e.g. <f4")
	fill := fl.String("fillvalue", "", "new fill value")
	dry := fl.Bool("n", false, "print what would change; write nothing")
	force := fl.Bool("force", false, "rewrite even past the chunk limit")
	ops, code := parseArgs("modify", fl, args, stderr)
	if code >= 0 {
		return code
	}
	if len(ops) != 2 {
		return badUsage("modify", stderr, "needs FILE and DATASET")
	}
	file, dataset := ops[0], ops[1]
	o, err := modifyOptions(fl, *chunks, *comp, *shuffle, *noShuffle, *dtype, *fill)
	if err != nil {
		return badUsage("modify", stderr, "%v", err)
	}
	o.Force = *force
	bar := &progressBar{w: stderr, name: "modify"}
	if isTerminal(stderr) && !*dry {
		o.Progress = func(done, total int64) { bar.update("rows of new chunks", done, total) }
	}
	if !*dry {
		if err := checkModifiable(file); err != nil {
			fmt.Fprintf(stderr, "vh5fs: %v\n", err)
			return 1
		}
	}
	before, statErr := os.Stat(file)
	res, err := history.Modify(file, dataset, o, *dry)
	bar.clear()
	if errors.Is(err, modify.ErrTooManyChunks) && *dry && len(res.Versions) > 0 {
		printModifyPlan(stdout, file, res.Plan, before)
	}
	if err != nil {
		if !errors.Is(err, modify.ErrUnsupported) && isOptionError(err) {
			return badUsage("modify", stderr, "%v", err)
		}
		return fail(stderr, file, fmt.Errorf("%s: %w", dataset, err))
	}
	if *dry {
		printModifyPlan(stdout, file, res.Plan, before)
		return 0
	}
	fmt.Fprintf(stdout, "%s: rewrote %s in %s: %s; %d -> %d chunk slots, %s read, in %s\n",
		file, dataset, plural(int64(len(res.Versions)), "version"), changeList(res.Plan), res.OldSlots, res.Slots, sizeString(res.Read), res.Elapsed.Round(1e6))
	fmt.Fprintf(stdout, "%s\n", chunkCounts(res.Plan))
	after, err := os.Stat(file)
	if statErr != nil || err != nil {
		return 0 // rewritten; a size that cannot be measured is not printed
	}
	fmt.Fprintf(stdout, "%s %s; %s\n", file, sizeChange(before.Size(), after.Size()), compactNote(res.Unused))
	return 0
}

// changeList is the plan's changes in one phrase.
func changeList(p modify.Plan) string {
	if c := p.Changes(); len(c) > 0 {
		return strings.Join(c, "; ")
	}
	return "storage as it is"
}

// printModifyPlan says what a rewrite would do and cost: its changes, the new chunks of
// each version and in total, and the estimated growth of the file, measured now.
func printModifyPlan(w io.Writer, file string, p modify.Plan, st os.FileInfo) {
	fmt.Fprintf(w, "%s: would rewrite %s in %s (%s): %s; raw_data holds %d chunk slots\n",
		file, p.Dataset, plural(int64(len(p.Versions)), "version"), strings.Join(p.Versions, ", "), changeList(p), p.OldSlots)
	fmt.Fprintf(w, "%s; about %s\n", chunkCounts(p), plural(p.NewSlots, "raw_data slot"))
	now := ""
	if st != nil {
		now = " (now " + byteSize(st.Size()) + ")"
	}
	grow := "about " + byteSize(p.Growth)
	compressed := p.GrowthWhole > p.Growth+p.Growth/10
	switch {
	case p.Strings:
		grow = "at least " + byteSize(p.Growth) + " (a lower bound: string chunks hold references to the strings, whose own bytes are not counted)"
	case !p.Counted:
		// The slots come from the old ones (no chunk map to count sources in): versions
		// that share part of a new chunk make more.
		grow = "at least " + byteSize(p.Growth) + " (a lower bound: a version's chunk map could not be read, so the new chunks are counted from the old ones)"
	case compressed && p.Sampled > 0:
		grow += fmt.Sprintf(" (a sample of %s stored in %.0f%% of their size; up to about %s stored whole)",
			plural(int64(p.Sampled), "new chunk"), 100*p.Ratio, byteSize(p.GrowthWhole))
	case compressed:
		grow += fmt.Sprintf(" if the new chunks compress as the old ones (up to about %s if they do not)", byteSize(p.GrowthWhole))
	}
	fmt.Fprintf(w, "estimate: the file%s would grow by %s; then %s\n", now, grow, compactNote(p.Unused))
}

// chunkCounts is "new chunks per version: v1 12, v2 16 (28 in total)", the list cut
// after a few versions.
func chunkCounts(p modify.Plan) string {
	const shown = 8
	var parts []string
	for i, v := range p.Versions {
		if i == shown {
			parts = append(parts, fmt.Sprintf("... (%d more)", len(p.Versions)-shown))
			break
		}
		parts = append(parts, fmt.Sprintf("%s %d", v, p.VersionChunks[i]))
	}
	return fmt.Sprintf("new chunks per version: %s (%d in total, at most %d in one version; the limit is %d without --force)",
		strings.Join(parts, ", "), p.Mappings, p.MaxChunks, modify.MaxVersionChunks)
}

// compactNote says what vh5fs compact gives back of the old storage, measured where
// the file's layout lets it be.
func compactNote(old int64) string {
	if old < 0 {
		return "vh5fs compact gives back the space the old storage took"
	}
	return fmt.Sprintf("vh5fs compact would give back at least %s (the old raw_data, hash_table and mapping lists, unused after the rewrite)",
		byteSize(old))
}

// isOptionError tells a refused option (usage, status 2) from a file that cannot be
// modified (status 1): the engine names the option it refuses.
func isOptionError(err error) bool {
	return strings.HasPrefix(err.Error(), "--")
}

func modifyOptions(fl *flag.FlagSet, chunks, comp string, shuffle, noShuffle bool, dtype, fill string) (modify.Options, error) {
	var o modify.Options
	set := map[string]bool{}
	fl.Visit(func(f *flag.Flag) { set[f.Name] = true })
	delete(set, "n")
	delete(set, "force")
	if len(set) == 0 {
		return o, errors.New("nothing to change: give --chunks, --compression, --shuffle, --no-shuffle, --dtype or --fillvalue")
	}
	if set["chunks"] {
		for _, s := range strings.Split(chunks, ",") {
			c, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
			if err != nil || c <= 0 {
				return o, fmt.Errorf("--chunks %q: positive integers separated by commas, one per axis", chunks)
			}
			o.Chunks = append(o.Chunks, c)
		}
	}
	if set["compression"] {
		name, level, hasLevel := strings.Cut(comp, "=")
		o.Compression, o.GzipLevel = name, -1
		switch {
		case name != "gzip" && name != "lzf" && name != "none":
			return o, fmt.Errorf("--compression %q: not one of gzip[=LEVEL], lzf, none", comp)
		case hasLevel && name != "gzip":
			return o, fmt.Errorf("--compression %q: only gzip takes a level", comp)
		case hasLevel:
			n, err := strconv.Atoi(level)
			if err != nil || n < 0 || n > 9 {
				return o, fmt.Errorf("--compression %q: the gzip level is 0 to 9", comp)
			}
			o.GzipLevel = n
		}
	}
	switch {
	case set["shuffle"] && set["no-shuffle"]:
		return o, errors.New("--shuffle and --no-shuffle together")
	case set["shuffle"]:
		o.Shuffle = &shuffle
	case set["no-shuffle"]:
		off := !noShuffle
		o.Shuffle = &off
	}
	if set["dtype"] {
		if dtype == "" {
			return o, errors.New("--dtype: empty")
		}
		o.DType = dtype
	}
	if set["fillvalue"] {
		if fill == "" {
			return o, errors.New("--fillvalue: empty")
		}
		o.FillValue = fill
	}
	return o, nil
}

// checkModifiable names who holds file's lock when modify cannot take it exclusively, as
// libhdf5's read-write open must: any mount or HDF5 program with the file open (their
// views of the old storage would go stale). nil when the lock is free, or when the open
// is left to report what else is wrong.
func checkModifiable(file string) error {
	if v := strings.ToUpper(os.Getenv("HDF5_USE_FILE_LOCKING")); v == "FALSE" || v == "0" {
		return nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil
	}
	defer f.Close()
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if err == nil {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		return nil
	}
	if !errors.Is(err, unix.EWOULDBLOCK) {
		return nil
	}
	h, ok := conflictingHolder(file, true)
	switch {
	case !ok:
		return fmt.Errorf("%s: another process holds a lock on the file: modify needs the file to itself; close it there first", file)
	case h.mountedAt != "":
		return fmt.Errorf("%s: in use by the vh5fs mount at %s (pid %d): modify rewrites the file's storage, which the "+
			"mount's view would miss; unmount it first (umount %s)", file, h.mountedAt, h.pid, h.mountedAt)
	}
	return fmt.Errorf("%s: another process has the file open (pid %d, %s): modify needs the file to itself; "+
		"close it there first", file, h.pid, orUnknown(h.comm))
}
