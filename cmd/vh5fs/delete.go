package main

// vh5fs delete: versioned-hdf5's delete_versions, in one journaled sync (package
// lifecycle). The words follow restic forget/prune and zfs destroy: -n says what "would"
// go, and both forms say what was freed.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/vh5fs/vh5fs/commit"
	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/history"
	"github.com/vh5fs/vh5fs/internal/timearg"
	"github.com/vh5fs/vh5fs/lifecycle"
	"github.com/vh5fs/vh5fs/versions"
)

const deleteUsage = `usage: vh5fs delete [-n] FILE VERSION...
       vh5fs delete [-n] FILE --keep-last N | --keep-every N | --before TIME

Deletes versions as versioned-hdf5's delete_versions does, with the same result in the
file: the children of a deleted version get its nearest kept ancestor as prev_version,
current_version moves to that ancestor if it was deleted, the chunks no kept version maps
are dropped from raw_data and hash_table (the others move down in their slot order), and
a data group no kept version has goes. __first_version__ cannot be deleted, nor a version
a saved stage is based on, nor one a tag holds (vh5fs tag; untag it first). The deletion is one journaled sync: killed at any moment, the
file is as it was, or deleted as a whole after 'vh5fs fsck --repair FILE' (or the next
read-write mount).

Instead of naming versions, a policy picks them by timestamp, never the current version:
  --keep-last N     keep the N newest versions, delete the rest
  --keep-every N    keep the newest version and every N-th older one
  --before TIME     delete the versions older than TIME (see 'vh5fs help time')
A policy keeps tagged versions besides what it keeps, and says which.
-n (--dry-run) prints what would be deleted and freed, and changes nothing.

Prints the versions deleted, the prev_version links and current_version changed, the
chunks dropped and their bytes, and the file's size before and after, as measured: HDF5
keeps the space a deletion frees inside the file (the file may even grow by the metadata
rewritten); vh5fs compact gives it back. On a terminal, stderr shows how the deletion
goes: a bar of the data groups planned, then of the chunks moved, then the time the
journaled sync takes. Refused while the file is mounted or open elsewhere (a read-write
mount holds its lock): unmount first.
`

func runDelete(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("delete", flag.ContinueOnError)
	dry := fl.Bool("n", false, "dry run")
	fl.BoolVar(dry, "dry-run", false, "dry run")
	keepLast := fl.Int("keep-last", 0, "keep the N newest versions")
	keepEvery := fl.Int("keep-every", 0, "keep every N-th version")
	before := fl.String("before", "", "delete versions older than TIME")
	ops, code := parseArgs("delete", fl, args, stderr)
	if code >= 0 {
		return code
	}
	if len(ops) == 0 {
		return badUsage("delete", stderr, "needs FILE")
	}
	file, names := ops[0], ops[1:]
	var policy lifecycle.Policy
	policies := 0
	fl.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "keep-last", "keep-every", "before":
			policies++
		}
	})
	switch {
	case policies > 1:
		return badUsage("delete", stderr, "--keep-last, --keep-every and --before are alternatives")
	case policies == 1 && len(names) > 0:
		return badUsage("delete", stderr, "name versions or give a policy, not both")
	case policies == 0 && len(names) == 0:
		return badUsage("delete", stderr, "needs the VERSIONs to delete, or --keep-last, --keep-every or --before")
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"keep-last", *keepLast}, {"keep-every", *keepEvery}} {
		given := false
		fl.Visit(func(f *flag.Flag) { given = given || f.Name == n.name })
		if given && n.v <= 0 {
			return badUsage("delete", stderr, "--%s %d: N must be a positive number", n.name, n.v)
		}
	}
	policy.KeepLast, policy.KeepEvery = *keepLast, *keepEvery
	if *before != "" {
		t, err := timearg.Parse(*before)
		if err != nil {
			return badUsage("delete", stderr, "--before: %v", err)
		}
		policy.Before = t
	}
	if !*dry {
		if err := checkDeletable(file); err != nil {
			fmt.Fprintf(stderr, "vh5fs: %v\n", err)
			return 1
		}
	}
	var f *versions.File
	var err error
	if *dry {
		f, err = openVersioned(file)
	} else if f, err = versions.OpenRW(file); err == nil && !f.Versioned() {
		f.Close()
		err = errNotVersioned
	}
	if err != nil {
		return fail(stderr, file, err)
	}
	defer f.Close()
	vs, err := f.Versions()
	if err != nil {
		return fail(stderr, file, err)
	}
	if policies == 1 {
		var held map[string][]string
		if names, held, err = history.Select(f, policy); err != nil {
			return fail(stderr, file, err)
		}
		printHeld(stdout, file, held, *dry)
		if len(names) == 0 {
			fmt.Fprintf(stdout, "%s: no version to delete (%d kept)\n", file, len(vs))
			return 0
		}
	}
	sizeBefore, statErr := os.Stat(file)
	var progress lifecycle.Progress
	var bar *stepBar
	if isTerminal(stderr) {
		bar = newStepBar(stderr, "delete")
		bar.wait("reading the versions")
		progress = bar.step
	}
	var p *lifecycle.Plan
	if *dry {
		p, err = history.PlanDelete(f, names, progress)
	} else {
		err = writeSide(f, func(c *commit.Committer) (err error) {
			p, err = history.Delete(c, names, history.DeleteOptions{Progress: progress})
			return err
		})
	}
	bar.done()
	if err != nil {
		// A failed sync says what the file holds and how to recover; any other failure
		// left the file as it was.
		if !*dry && !errors.Is(err, h5.ErrStopped) && !strings.Contains(err.Error(), "nothing deleted") {
			err = fmt.Errorf("%w; nothing deleted", err)
		}
		return fail(stderr, file, err)
	}
	printPlan(stdout, file, p, vs, *dry)
	if *dry {
		fmt.Fprintf(stdout, "would free %s of chunk data: %s\n", byteSize(p.FreedBytes), compactAfterDelete)
		return 0
	}
	// The size is measured once libhdf5 has closed the file.
	if err := f.Close(); err != nil {
		return fail(stderr, file, err)
	}
	after, err := os.Stat(file)
	if statErr != nil || err != nil {
		fmt.Fprintf(stdout, "freed %s of chunk data: %s\n", byteSize(p.FreedBytes), compactAfterDelete)
		return 0
	}
	fmt.Fprintf(stdout, "freed %s of chunk data; %s %s: %s\n",
		byteSize(p.FreedBytes), file, sizeChange(sizeBefore.Size(), after.Size()), compactAfterDelete)
	return 0
}

// printHeld says which versions a policy picked that names hold, and so are kept.
func printHeld(w io.Writer, file string, held map[string][]string, dry bool) {
	if len(held) == 0 {
		return
	}
	var parts []string
	for _, v := range slices.Sorted(maps.Keys(held)) {
		parts = append(parts, v+" ("+strings.Join(held[v], ", ")+")")
	}
	keep := "kept"
	if dry {
		keep = "would keep"
	}
	fmt.Fprintf(w, "%s: %s %s the policy picked, held by tags or branches: %s\n", file, keep, plural(int64(len(held)), "version"), strings.Join(parts, " "))
}

// compactAfterDelete is where the space a deletion frees goes.
const compactAfterDelete = "HDF5 keeps freed space in the file until vh5fs compact"

// printPlan says what the deletion did (or, dry, would do).
func printPlan(w io.Writer, file string, p *lifecycle.Plan, vs []versions.Version, dry bool) {
	would := func(done, todo string) string {
		if dry {
			return "would " + todo
		}
		return done
	}
	stamps := map[string]string{}
	for _, v := range vs {
		stamps[v.Name] = v.Timestamp
	}
	fmt.Fprintf(w, "%s: %s %d of %s:\n", file, would("deleted", "delete"), len(p.Delete), plural(int64(len(vs)), "version"))
	for _, v := range p.Delete {
		fmt.Fprintf(w, "  %s  %s\n", v, stamps[v])
	}
	for _, r := range p.Relinks {
		fmt.Fprintf(w, "%s %s: prev_version %s -> %s\n", would("relinked", "relink"), r.Version, r.From, r.To)
	}
	if p.NewCurrent != p.Current {
		fmt.Fprintf(w, "%s current_version: %s -> %s\n", would("moved", "move"), p.Current, p.NewCurrent)
	}
	var dropped, moved, kept int64
	var groups []string
	for _, g := range p.Groups {
		dropped += g.Dropped
		moved += int64(g.Moves)
		kept += int64(len(g.Kept))
		if g.Action == lifecycle.Drop {
			groups = append(groups, g.Path)
		}
	}
	fmt.Fprintf(w, "%s %s; %s %d of the %d kept in the data groups compacted\n",
		would("dropped", "drop"), plural(dropped, "chunk"), would("moved", "move"), moved, kept)
	if len(groups) > 0 {
		fmt.Fprintf(w, "%s data groups: %s\n", would("dropped", "drop"), strings.Join(groups, " "))
	}
}

// sizeChange says how a file's size, measured before and after, changed: "grew by X
// (A -> B)", "shrank by X (A -> B)" or "kept its size (A)".
func sizeChange(before, after int64) string {
	switch {
	case after > before:
		return fmt.Sprintf("grew by %s (%s -> %s)", byteSize(after-before), byteSize(before), byteSize(after))
	case after < before:
		return fmt.Sprintf("shrank by %s (%s -> %s)", byteSize(before-after), byteSize(before), byteSize(after))
	}
	return fmt.Sprintf("kept its size (%s)", byteSize(before))
}

// plural is "1 chunk", "2 chunks".
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// byteSize is n in B, KiB, MiB, ... with one decimal.
func byteSize(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, unit := float64(n)/1024, 0
	for v >= 1024 && unit < 4 {
		v, unit = v/1024, unit+1
	}
	return fmt.Sprintf("%.1f %s", v, []string{"KiB", "MiB", "GiB", "TiB", "PiB"}[unit])
}

// writeSide runs fn on f's write side (f open read-write), as a mount's history edits run
// on the mount's.
func writeSide(f *versions.File, fn func(c *commit.Committer) error) error {
	c, err := commit.Open(f, commit.Options{})
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(c)
}

// checkDeletable refuses, in one line, a file delete cannot write (checkWritableFor).
func checkDeletable(file string) error {
	return checkWritableFor(file, "delete", "deleting", "nothing can be deleted from the file")
}

// checkWritableFor refuses, in one line, a file a command (verb, gerund: "delete",
// "deleting"; none: what it cannot do then) cannot write: on a read-only filesystem, not
// writable, in a directory that takes no journal, or locked by another process (a vh5fs
// mount, an HDF5 writer or reader), as a read-write mount's preflight (rwcheck.go) does.
func checkWritableFor(file, verb, gerund, none string) error {
	st, err := os.Stat(file)
	if err != nil || !st.Mode().IsRegular() {
		return nil // the open reports it
	}
	var fs unix.Statfs_t
	if unix.Statfs(file, &fs) == nil && fs.Flags&unix.ST_RDONLY != 0 {
		return fmt.Errorf("%s: its filesystem is read-only: %s", file, none)
	}
	fh, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("%s: opening it for writing: %w", file, err)
	}
	defer fh.Close()
	dir, err := filepath.Abs(filepath.Dir(file))
	if err == nil {
		err = checkDirWritable(dir)
	}
	if err != nil {
		return fmt.Errorf("%s: directory %s %v: %s writes its journal (%s) beside the file",
			file, dir, err, verb, filepath.Base(file)+h5.JournalSuffix)
	}
	if v := strings.ToUpper(os.Getenv("HDF5_USE_FILE_LOCKING")); v == "FALSE" || v == "0" {
		return nil
	}
	err = unix.Flock(int(fh.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	switch {
	case err == nil:
		unix.Flock(int(fh.Fd()), unix.LOCK_UN)
		return nil
	case !errors.Is(err, unix.EWOULDBLOCK):
		return nil // no flock here: libhdf5's open decides
	}
	h, ok := conflictingHolder(file, true)
	switch {
	case !ok:
		return fmt.Errorf("%s: another process holds a lock on the file: %s needs the file to itself; close it there first", file, gerund)
	case h.mountedAt != "" && h.exclusive:
		return fmt.Errorf("%s: in use by the read-write vh5fs mount at %s (pid %d): unmount it first (umount %s), then %s",
			file, h.mountedAt, h.pid, h.mountedAt, verb)
	case h.mountedAt != "":
		return fmt.Errorf("%s: in use by the read-only vh5fs mount at %s (pid %d): %s needs the file to itself; "+
			"unmount it first (umount %s)", file, h.mountedAt, h.pid, gerund, h.mountedAt)
	case h.exclusive:
		return fmt.Errorf("%s: another process holds the file's lock for writing (pid %d, %s): wait until it closes the file",
			file, h.pid, orUnknown(h.comm))
	}
	return fmt.Errorf("%s: another process has the file open (pid %d, %s): %s needs the file to itself; close it there first",
		file, h.pid, orUnknown(h.comm), gerund)
}
