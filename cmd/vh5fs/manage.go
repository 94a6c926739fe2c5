package main

// The commands that manage a file's versions: compact.

import (
	"flag"
	"fmt"
	"io"

	"github.com/vh5fs/vh5fs/compact"
)

func init() {
	commands["compact"] = command{`usage: vh5fs compact FILE [-o OUT]

Rewrites FILE without the space no object uses any more: HDF5 never gives freed space
back (the chunks of deleted versions, metadata rewritten by commits), so a file only
grows. Every object is copied into a new file beside FILE (raw_data chunks as stored,
never decoded), which is fsynced and then renamed over FILE, or to OUT with -o: a crash
before the rename leaves FILE as it was. Every version reads as before, with the same
raw_data slots (stages kept for read-write mounts stay valid), and versioned-hdf5 reads
and extends the result. Refused while a writer has FILE open (a read-write mount, h5py
in "a" mode); read-only mounts go on serving the old file until mounted again.
Prints the sizes before and after; shows a progress bar on stderr when it is a terminal.
`, runCompact}
}

func runCompact(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("compact", flag.ContinueOnError)
	out := fl.String("o", "", "write the compacted file to OUT instead of replacing FILE")
	ops, code := parseArgs("compact", fl, args, stderr)
	if code >= 0 {
		return code
	}
	if len(ops) != 1 {
		return badUsage("compact", stderr, "needs one FILE")
	}
	file := ops[0]
	var progress compact.Progress
	bar := &progressBar{w: stderr, name: "compact"}
	if isTerminal(stderr) {
		progress = func(done, total int64) { bar.update("raw_data chunks", done, total) }
	}
	res, err := compact.File(file, *out, progress)
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
