package main

// The commands that manage a file's versions: compact.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/vh5fs/vh5fs/commit"
	"github.com/vh5fs/vh5fs/compact"
	"github.com/vh5fs/vh5fs/history"
	"github.com/vh5fs/vh5fs/lifecycle"
	"github.com/vh5fs/vh5fs/stagedir"
	"github.com/vh5fs/vh5fs/versions"
)

func init() {
	commands["compact"] = command{`usage: vh5fs compact FILE [-o OUT [--force]]

Rewrites FILE without the space no object uses any more: HDF5 never gives freed space
back (the chunks of deleted versions, metadata rewritten by commits), so a file only
grows. Every object is copied into a new file beside FILE (raw_data chunks as stored,
never decoded), which is fsynced and then renamed over FILE, or to OUT with -o: a crash
before the rename leaves FILE as it was. Every version reads as before, with the same
raw_data slots (stages kept for read-write mounts stay valid), and versioned-hdf5 reads
and extends the result. A symbolic link is followed: its target is compacted, the link
stays a link.

The new file is a new inode, which a program holding the old one would never see: in
place, compact is refused while any other process has FILE open (a mount, read-only
too, h5py, any reader), naming each by pid (a vh5fs mount by its mount point), and for
a FILE with several hard links. -o OUT writes a new file and leaves FILE alone; an
existing OUT is replaced only with --force; OUT naming FILE itself compacts in place.
A plain (not versioned-hdf5) HDF5 file, and a file with an interrupted change pending
(see 'vh5fs fsck'), are refused and left as they were.
The chunks of versions deleted through a mount that its reclaim did not drop yet (see
'vh5fs fsck') would survive the copy in their slots: compact reclaims them in FILE first,
through its journal (with -o OUT too, so FILE must then be the command's alone as well),
unless a stage is saved beside FILE, whose slots the reclaim would move; then they stay.
Prints the sizes before and after; shows a progress bar on stderr when it is a terminal.
`, runCompact}
}

// compactEffect is what a compaction would do to the processes holding the file.
const compactEffect = "compact replaces the file with a new one, which a process holding the old one never sees"

func runCompact(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("compact", flag.ContinueOnError)
	out := fl.String("o", "", "write the compacted file to OUT instead of replacing FILE")
	force := fl.Bool("force", false, "replace an existing OUT")
	ops, code := parseArgs("compact", fl, args, stderr)
	if code >= 0 {
		return code
	}
	if len(ops) != 1 {
		return badUsage("compact", stderr, "needs one FILE")
	}
	if *force && *out == "" {
		return badUsage("compact", stderr, "--force replaces an existing OUT: it needs -o OUT")
	}
	file := ops[0]
	o := compact.Options{
		Out:   *out,
		Force: *force,
		InUse: func(path string) error {
			if err := checkAlone(path, compactEffect); err != nil {
				return fmt.Errorf("%w; nothing changed", err)
			}
			return nil
		},
	}
	bar := &progressBar{w: stderr, name: "compact"}
	var reclaimBar *stepBar
	if isTerminal(stderr) {
		reclaimBar = newStepBar(stderr, "compact: reclaim")
		o.ReclaimProgress = reclaimBar.step
		o.Progress = func(done, total int64) {
			reclaimBar.done()
			bar.update("raw_data chunks", done, total)
		}
	}
	res, err := history.Compact(file, o)
	reclaimBar.done()
	bar.clear()
	if err != nil {
		return fail(stderr, file, err)
	}
	if res.Reclaimed != nil {
		fmt.Fprintf(stdout, "%s: %s\n", file, reclaimedLine(res.Reclaimed))
	}
	if len(res.StillPending) > 0 {
		fmt.Fprintf(stdout, "%s: %s stay pending to reclaim (chunks of deleted versions): stage %s saved beside the file "+
			"records raw_data slots the reclaim would move; commit or discard it, then compact again\n",
			file, plural(int64(len(res.StillPending)), "data group"), strings.Join(res.Stages, ", "))
	}
	if res.Kept {
		what := "left as it was"
		if res.Reclaimed != nil {
			what = "left as the reclaim made it"
		}
		fmt.Fprintf(stdout, "%s: %s, nothing to reclaim (a compacted copy takes %s): %s\n",
			file, sizeString(res.Before), sizeString(res.After), what)
		return 0
	}
	dst := file
	if *out != "" {
		dst = *out
	}
	if st, err := os.Lstat(dst); err == nil && st.Mode()&os.ModeSymlink != 0 {
		dst = fmt.Sprintf("%s (the target of %s)", res.Out, dst)
	}
	fmt.Fprintf(stdout, "%s: %s -> %s (%s of raw_data chunks, %s of metadata and other data), written to %s\n",
		file, sizeString(res.Before), sizeString(res.After), sizeString(res.Chunks), sizeString(res.After-res.Chunks), dst)
	return 0
}

// reclaimedLine says what a reclaim of a pending set did.
func reclaimedLine(p *lifecycle.Plan) string {
	if len(p.Groups) == 0 && len(p.Blocked) > 0 {
		s := "nothing reclaimed"
		for _, b := range p.Blocked {
			s += "; left pending, " + b.String()
		}
		return s
	}
	s := fmt.Sprintf("reclaimed the chunks of deleted versions pending in %s: %s moved, %s of chunk data freed",
		plural(int64(len(p.Groups)), "data group"), plural(int64(p.Moves()), "chunk"), byteSize(p.FreedBytes))
	for _, b := range p.Blocked {
		s += "; left pending, " + b.String()
	}
	return s
}

// sizeString is n bytes in binary units, as ls -lh shows them.
func sizeString(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// reclaimEffect is what a reclaim does to the processes holding the file.
const reclaimEffect = "the reclaim moves chunks under a process that reads the file"

// reclaimPending reclaims, for fsck --repair, the chunks deletions' bodies left pending
// (lifecycle.Reclaim), with the file to itself, unless a saved stage records the slots
// the reclaim would move. It returns the exit status, 0 to go on.
func reclaimPending(file string, stdout, stderr io.Writer) int {
	pending, err := history.Pending(file)
	if err != nil || len(pending) == 0 {
		if err != nil {
			return fail(stderr, file, err)
		}
		return 0
	}
	if err := stagedir.Check(file, stagedir.Reclaim(nil)); err != nil {
		var in *stagedir.InUseError
		if !errors.As(err, &in) {
			return fail(stderr, file, err)
		}
		fmt.Fprintf(stdout, "%s: %s left pending: %s: commit or remove it first\n", file,
			plural(int64(len(pending)), "data group"), in.Reason())
		return 0
	}
	if err := checkAlone(file, reclaimEffect); err != nil {
		return fail(stderr, file, fmt.Errorf("%w; nothing reclaimed", err))
	}
	f, err := versions.OpenRW(file)
	if err != nil {
		return fail(stderr, file, err)
	}
	defer f.Close()
	var bar *stepBar
	if isTerminal(stderr) {
		bar = newStepBar(stderr, "fsck: reclaim")
	}
	var progress lifecycle.Progress
	if bar != nil {
		progress = bar.step
	}
	var p *lifecycle.Plan
	err = writeSide(f, func(c *commit.Committer) (err error) {
		p, err = history.Reclaim(c, nil, progress)
		return err
	})
	bar.done()
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		return fail(stderr, file, err)
	}
	if p != nil {
		fmt.Fprintf(stdout, "%s: %s\n", file, reclaimedLine(p))
	}
	return 0
}
