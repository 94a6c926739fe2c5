package main

// The commands that manage a file's versions: compact.

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/vh5fs/vh5fs/compact"
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
	if isTerminal(stderr) {
		o.Progress = func(done, total int64) { bar.update("raw_data chunks", done, total) }
	}
	res, err := compact.File(file, o)
	bar.clear()
	if err != nil {
		return fail(stderr, file, err)
	}
	if res.Kept {
		fmt.Fprintf(stdout, "%s: %s, nothing to reclaim (a compacted copy takes %s): left as it was\n",
			file, sizeString(res.Before), sizeString(res.After))
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
