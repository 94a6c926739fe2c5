package main

// The inspection commands: log, ls, info, diff, fsck. Each prints to stdout; errors are one
// line "vh5fs: FILE: problem" on stderr and exit status 1, usage errors exit 2.

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/vh5fs/vh5fs/fsck"
	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/h5json"
	"github.com/vh5fs/vh5fs/history"
	"github.com/vh5fs/vh5fs/inspect"
	"github.com/vh5fs/vh5fs/internal/timearg"
	"github.com/vh5fs/vh5fs/named"
	"github.com/vh5fs/vh5fs/stagedir"
	"github.com/vh5fs/vh5fs/versions"
)

type command struct {
	usage string // first line: the synopsis
	run   func(args []string, stdout, stderr io.Writer) int
}

var commands map[string]command

func init() {
	commands = map[string]command{
		"log": {`usage: vh5fs log FILE [VERSION] [--at TIME] [-n N] [--oneline] [--json]
       vh5fs log --all FILE [-n N]

The history of VERSION (default: the current version), newest first, following
prev_version to the first version: each version's name, timestamp, parent, the
datasets changed from its parent (A added, M modified: shape or chunk map differs,
D removed) and the HDF5 attributes changed on the groups and datasets both hold
('attribute x units: "m" -> "km"', 'added: V', 'removed (was V)'; values as the
user.hdf5.* xattrs show them). / is the version's own group, whose attributes belong to
that version alone (versioned-hdf5 does not carry them to the next): the ones it adds
or changes are listed, not the parent's it lacks.
--at TIME starts from the version current at TIME (see 'vh5fs help time').
-n N shows at most N versions; --oneline one line per version: name, timestamp and the
number of datasets (and attributes) changed. --json prints one JSON array, a version an
object: version, timestamp, parent, current, datasets [{path, change}], attributes
[{path, name, change, old, new}] (change: added, removed, modified; old and new are the
values, absent when the attribute is).
--all shows every version, one line each, with the branches drawn as lanes (as
git log --all --graph --oneline draws them): writing versions/<old>/ in a read-write
mount makes a sibling of <old>'s children, a new branch.
`, runLog},
		"ls": {`usage: vh5fs ls FILE [VERSION] [--at TIME]
       vh5fs ls --stages FILE

The datasets of VERSION (default: the current version), one per line: path, dtype, shape.
--stages: the stages kept beside FILE for read-write mounts (stage/NAME), one per line:
name, base version, and what each changes (as last saved: a running mount saves a
dataset's data at fsync and at unmount), and a commit that was under way when its mount
ended.
`, runLs},
		"info": {`usage: vh5fs info FILE[:VERSION[/DATASET|/GROUP]] [--at TIME]

FILE alone: data_version, current version, number of versions and the current version's
datasets. FILE:VERSION: the version's timestamp, parent and datasets. FILE:VERSION/DATASET:
the dataset's dtype, shape, chunks, filters, fill value, chunks stored of the total and
chunks shared with the parent version. FILE:VERSION/GROUP: the group's attributes (JSON
values), its datasets (dtype, shape) and its groups. With --at, the part after ':' is the
DATASET or GROUP of the version current at TIME.
`, runInfo},
		"diff": {`usage: vh5fs diff [-v] FILE V1 V2 [DATASET] [--json]

What changed in each dataset (or only DATASET) from version V1 to V2, one line each: how
many elements changed and the range of their old and new values (numeric dtypes), and,
when the shape changed, how many elements were added and removed and their values.
Variable-length strings are counted alike, compared by value.
Then one line per HDF5 attribute changed on a group or dataset both versions hold (or on
DATASET): 'x: attribute units: "m" -> "km"', 'added: V' or 'removed (was V)', values as
the user.hdf5.* xattrs show them; / is the version's own group, whose attributes belong
to each version alone: those V2 adds or changes are listed, not those only V1 has.
--json prints one JSON object: from, to, datasets [{path, change (added, removed,
modified or unchanged), old_shape, new_shape, elements_changed, elements_compared,
elements_added, elements_removed}], attributes [{path, name, change, old, new}].
Only the chunks that differ are read: the chunk maps tell the others (the same raw_data
slot, or equal hash-table digests, hold the same data).
-v adds, per dataset, how the chunks were decided and one line per differing chunk with
its grid index and the element range it covers (in V2; in V1 for removed chunks), and the
range of old, new, added and removed values of variable-length strings, as JSON strings.
Exit status 0 whether or not they differ.
`, runDiff},
		"fsck": {`usage: vh5fs fsck [--repair [--discard-journal]] FILE

Checks the file's invariants (version metadata, hash tables against slot contents,
mappings). Prints each problem and exits 1 if there is any, else prints
"ok: N versions checked". Shows a progress bar on stderr when it is a terminal.
--repair first completes a commit that was interrupted (the process killed, the machine
stopped) from the journal it left beside the file, FILE.vh5fs-journal, as a read-write mount
does; if another program wrote to the file since, it leaves the file and the journal alone
and says so. --discard-journal then removes the journal instead, dropping that commit.
Versions deleted through a mount may leave chunks to reclaim (the mount reclaims them once
the deletions pause, and at unmount; a kill can leave them): fsck says so in one line,
which is no problem, and --repair reclaims them, as vh5fs delete and compact do, unless a
stage is saved beside the file (it records the slots the reclaim would move).
`, runFsck},
		"refs":   {refsUsage, runRefs},
		"delete": {deleteUsage, runDelete},
		"warm":   {warmUsage, runWarm},
	}
}

func runHelp(args []string, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stdout, usage)
		return 0
	}
	switch args[0] {
	case "time":
		fmt.Fprint(os.Stdout, timearg.Help())
		return 0
	case "mount":
		fmt.Fprint(os.Stdout, usage)
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "vh5fs: help: unknown command %q\n", args[0])
		return 2
	}
	fmt.Fprint(os.Stdout, c.usage)
	return 0
}

// usageError reports a bad command line: one line and where to read more, status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// parseArgs parses flags given anywhere among the operands. It returns (nil, 0) and the
// operands to go on, or a non-negative exit status when done (help printed, usage error).
func parseArgs(name string, fl *flag.FlagSet, args []string, stderr io.Writer) ([]string, int) {
	fl.SetOutput(io.Discard)
	operands, err := interspersed(fl, splitShortValues(fl, args))
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(os.Stdout, commands[name].usage)
		return nil, 0
	}
	if err != nil {
		return nil, badUsage(name, stderr, "%v", flagError(fl, err))
	}
	return operands, -1
}

// flagValueError matches the flag package's refusal of a value, which names neither the
// option as it is typed nor the problem in words.
var flagValueError = regexp.MustCompile(`^invalid (?:boolean )?value ("(?:[^"\\]|\\.)*") for (?:flag )?-(\S+): (.*)$`)

// flagError rewrites the flag package's refusal of a value as `--name "value": why`.
func flagError(fl *flag.FlagSet, err error) error {
	m := flagValueError.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	value, name, why := m[1], m[2], m[3]
	f := fl.Lookup(name)
	if f == nil {
		return err
	}
	dashes := "--"
	if len(name) == 1 {
		dashes = "-"
	}
	switch {
	case strings.Contains(why, "out of range"):
		why = "out of range"
	case isBoolFlag(f):
		why = "not true or false"
	default:
		if _, isNum := f.Value.(interface{ Get() any }); isNum {
			why = "not a whole number"
		}
	}
	return fmt.Errorf("%s%s %s: %s", dashes, name, value, why)
}

// isBoolFlag reports whether f is a switch (-n, --force).
func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// badUsage prints one line naming the problem and the help to read, and returns 2.
func badUsage(name string, stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "vh5fs: %s: %s; see 'vh5fs help %s'\n", name, fmt.Sprintf(format, args...), name)
	return 2
}

// splitShortValues turns "-n5" into "-n" "5" for fl's one-letter flags, as git and most
// Unix tools accept it (Go's flag package would look for a flag named "n5").
func splitShortValues(fl *flag.FlagSet, args []string) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' && fl.Lookup(a[1:2]) != nil && fl.Lookup(a[1:]) == nil &&
			!strings.Contains(a, "=") {
			out = append(out, a[:2], a[2:])
			continue
		}
		out = append(out, a)
	}
	return out
}

// fail prints one error line for file and returns 1.
func fail(stderr io.Writer, file string, err error) int {
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "vh5fs: %s\n", ue.msg)
		return 2
	}
	msg := openError(file, false, err)
	if !strings.HasPrefix(msg, file+":") {
		msg = file + ": " + msg
	}
	fmt.Fprintf(stderr, "vh5fs: %s\n", msg)
	return 1
}

// errNotVersioned refuses a plain HDF5 file where versions are needed.
var errNotVersioned = errors.New("not a versioned-hdf5 file (no _version_data)")

// openVersioned opens file for reading and requires the versioned-hdf5 layout.
func openVersioned(file string) (*versions.File, error) {
	f, err := versions.Open(file)
	if err != nil {
		return nil, err
	}
	if !f.Versioned() {
		f.Close()
		return nil, errNotVersioned
	}
	return f, nil
}

// decoration marks v in a log as git log --decorate does: " (current, branch: dev, tag:
// release-1)", "" for a version neither current, a branch's head nor tagged.
func decoration(v versions.Version, cur string, refs named.Refs) string {
	var marks []string
	if v.Name == cur {
		marks = append(marks, "current")
	}
	for _, b := range refs.Heads(v) {
		marks = append(marks, "branch: "+b)
	}
	for _, tag := range refs.Holding(v) {
		marks = append(marks, "tag: "+tag)
	}
	if len(marks) == 0 {
		return ""
	}
	return " (" + strings.Join(marks, ", ") + ")"
}

// resolveVersion picks the version: the one named (a version, or a tag of one), the one
// current at at, or the current.
func resolveVersion(f *versions.File, name, at string) (string, error) {
	switch {
	case at != "":
		t, err := timearg.Parse(at)
		if err != nil {
			return "", usageError{err.Error()}
		}
		v, ok, err := f.VersionAt(t)
		if err != nil {
			return "", err
		}
		if !ok {
			return "", fmt.Errorf("no version at or before %s", versions.CanonicalTimestamp(t))
		}
		return v.Name, nil
	case name != "":
		return history.Resolve(f, name)
	}
	cur, err := f.CurrentVersion()
	if err != nil {
		return "", err
	}
	if cur == "" {
		return "", errors.New("no committed version")
	}
	return cur, nil
}

// openAtVersion parses `CMD FILE [VERSION] [--at TIME]`, opens FILE and resolves the
// version (the current one by default; chosen tells VERSION or --at was given). code >= 0
// means: exit with it (f is nil then). fl may carry the command's own flags.
func openAtVersion(fl *flag.FlagSet, atHelp string, args []string, stderr io.Writer) (f *versions.File, file, version string, chosen bool, code int) {
	cmd := fl.Name()
	at := fl.String("at", "", atHelp)
	ops, code := parseArgs(cmd, fl, args, stderr)
	if code >= 0 {
		return nil, "", "", false, code
	}
	if len(ops) < 1 || len(ops) > 2 {
		return nil, "", "", false, badUsage(cmd, stderr, "needs FILE and at most one VERSION")
	}
	if len(ops) == 2 && *at != "" {
		return nil, "", "", false, badUsage(cmd, stderr, "give VERSION or --at, not both")
	}
	file = ops[0]
	f, err := openVersioned(file)
	if err != nil {
		return nil, "", "", false, fail(stderr, file, err)
	}
	name := ""
	if len(ops) == 2 {
		name = ops[1]
	}
	version, err = resolveVersion(f, name, *at)
	if err != nil {
		f.Close()
		return nil, "", "", false, fail(stderr, file, err)
	}
	return f, file, version, len(ops) == 2 || *at != "", -1
}

func runLog(args []string, stdout, stderr io.Writer) int {
	boundHeap()
	fl := flag.NewFlagSet("log", flag.ContinueOnError)
	limit := fl.Int("n", 0, "show at most this many versions (0: all)")
	oneline := fl.Bool("oneline", false, "one line per version")
	everyVersion := fl.Bool("all", false, "every version, with branches")
	asJSON := fl.Bool("json", false, "one JSON array")
	f, file, start, chosen, code := openAtVersion(fl, "start from the version current at this time", args, stderr)
	if code >= 0 {
		return code
	}
	defer f.Close()
	if *limit < 0 {
		return badUsage("log", stderr, "-n must not be negative")
	}
	if *asJSON && (*oneline || *everyVersion) {
		return badUsage("log", stderr, "--json goes with neither --oneline nor --all")
	}
	if *everyVersion {
		if chosen {
			return badUsage("log", stderr, "--all shows every version: give no VERSION or --at")
		}
		return logAll(f, file, *limit, stdout, stderr)
	}
	cur, _ := f.CurrentVersion()
	hist, err := inspect.History(f, start)
	if err != nil {
		return fail(stderr, file, err)
	}
	refs, err := named.Read(f.HDF5())
	if err != nil {
		return fail(stderr, file, err)
	}
	all := hist
	if *limit > 0 && *limit < len(hist) {
		hist = hist[:*limit]
	}
	entries := []logJSON{}
	for i, v := range hist {
		parent := v.PrevVersion
		dangling := parent != "" && (i+1 == len(all) || all[i+1].Name != parent)
		from := parent
		if dangling {
			from = ""
		}
		changes, attrs, err := versionChanges(f, from, v.Name)
		if err != nil {
			return fail(stderr, file, err)
		}
		if *asJSON {
			entries = append(entries, newLogJSON(v, parent, dangling, v.Name == cur, changes, attrs))
			continue
		}
		mark := decoration(v, cur, refs)
		if *oneline {
			fmt.Fprintf(stdout, "%s  %s  %s%s\n", v.Name, v.Timestamp, changedCount(len(changes), len(attrs)), mark)
			continue
		}
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		fmt.Fprintf(stdout, "version %s%s\n", v.Name, mark)
		fmt.Fprintf(stdout, "timestamp: %s\n", v.Timestamp)
		switch {
		case parent == "":
			fmt.Fprintf(stdout, "parent:    %s\n", versions.FirstVersion)
		case dangling:
			fmt.Fprintf(stdout, "parent:    %s (missing)\n", parent)
		default:
			fmt.Fprintf(stdout, "parent:    %s\n", parent)
		}
		if len(changes) == 0 && len(attrs) == 0 {
			fmt.Fprintln(stdout, "    (no dataset changed)")
		}
		for _, c := range changes {
			fmt.Fprintf(stdout, "    %s %s\n", changeLetter[c.Kind], c.Path)
		}
		for _, a := range attrs {
			fmt.Fprintf(stdout, "    attribute %s %s\n", objectName(a.Path), attrChangeText(a))
		}
	}
	if *asJSON {
		return printJSON(stdout, stderr, file, entries)
	}
	return 0
}

// versionChanges is what version name changed against from ("": against an empty
// version), datasets and attributes: what every form of log lists.
func versionChanges(f *versions.File, from, name string) ([]inspect.DatasetChange, []inspect.AttrChange, error) {
	changes, err := inspect.ChangedDatasets(f, from, name)
	if err != nil {
		return nil, nil, err
	}
	attrs, err := inspect.AttrChanges(f, from, name, "")
	if err != nil {
		return nil, nil, err
	}
	return changes, attrs, nil
}

// changedCount is "2 changed", with ", 1 attribute changed" when attributes changed.
func changedCount(datasets, attrs int) string {
	s := fmt.Sprintf("%d changed", datasets)
	if attrs > 0 {
		s += fmt.Sprintf(", %s changed", plural(int64(attrs), "attribute"))
	}
	return s
}

// objectName is an attribute's object as printed: its path in the version, / for the
// version's own group.
func objectName(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

// attrChangeText is `units: "m" -> "km"`, `units added: "m"` or `units removed (was "m")`.
func attrChangeText(a inspect.AttrChange) string {
	switch a.Kind {
	case inspect.Added:
		return fmt.Sprintf("%s added: %s", a.Name, a.New)
	case inspect.Removed:
		return fmt.Sprintf("%s removed (was %s)", a.Name, a.Old)
	}
	return fmt.Sprintf("%s: %s -> %s", a.Name, a.Old, a.New)
}

// attrJSON is an attribute change in the JSON outputs of log and diff.
type attrJSON struct {
	Path   string          `json:"path"`
	Name   string          `json:"name"`
	Change string          `json:"change"`
	Old    json.RawMessage `json:"old,omitempty"`
	New    json.RawMessage `json:"new,omitempty"`
}

func newAttrJSON(cs []inspect.AttrChange) []attrJSON {
	out := make([]attrJSON, 0, len(cs))
	for _, c := range cs {
		a := attrJSON{Path: objectName(c.Path), Name: c.Name, Change: c.Kind}
		// A change of type alone carries the dtype after the value: a string then.
		raw := func(text string) json.RawMessage {
			if text == "" {
				return nil
			}
			if json.Valid([]byte(text)) {
				return json.RawMessage(text)
			}
			b, _ := json.Marshal(text)
			return b
		}
		a.Old, a.New = raw(c.Old), raw(c.New)
		out = append(out, a)
	}
	return out
}

// logJSON is one version in log --json.
type logJSON struct {
	Version       string        `json:"version"`
	Timestamp     string        `json:"timestamp"`
	Parent        string        `json:"parent"`
	ParentMissing bool          `json:"parent_missing,omitempty"`
	Current       bool          `json:"current"`
	Datasets      []datasetJSON `json:"datasets"`
	Attributes    []attrJSON    `json:"attributes"`
}

type datasetJSON struct {
	Path   string `json:"path"`
	Change string `json:"change"`
}

func newLogJSON(v versions.Version, parent string, dangling, current bool, changes []inspect.DatasetChange, attrs []inspect.AttrChange) logJSON {
	if parent == "" {
		parent = versions.FirstVersion
	}
	e := logJSON{Version: v.Name, Timestamp: v.Timestamp, Parent: parent, ParentMissing: dangling, Current: current,
		Datasets: make([]datasetJSON, 0, len(changes)), Attributes: newAttrJSON(attrs)}
	for _, c := range changes {
		e.Datasets = append(e.Datasets, datasetJSON{c.Path, c.Kind})
	}
	return e
}

// printJSON writes v indented, with a final newline.
func printJSON(stdout, stderr io.Writer, file string, v any) int {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fail(stderr, file, err)
	}
	fmt.Fprintf(stdout, "%s\n", b)
	return 0
}

// datasetRows lists the datasets of a version with their dtype and shape, straight from
// the HDF5 objects (so datasets vh5fs cannot serve are listed too).
func datasetRows(f *versions.File, version string) ([][3]string, error) {
	paths, err := f.DatasetPaths(version)
	if err != nil {
		return nil, err
	}
	v, _, err := f.Version(version)
	if err != nil {
		return nil, err
	}
	rows := make([][3]string, 0, len(paths))
	for _, p := range paths {
		// versions.File reads a version's dataset from the file's bytes where it can:
		// libhdf5 opening a virtual dataset decodes every mapping at once (gigabytes for
		// a few hundred thousand chunks).
		d, err := f.Dataset(v.Path() + "/" + p)
		if err != nil {
			return nil, err
		}
		rows = append(rows, [3]string{p, dtypeName(d.Type), shapeString(d.Shape)})
	}
	return rows, nil
}

func dtypeName(t h5.Type) string {
	if t.VlenString {
		return "vlen-str"
	}
	return t.DType
}

func shapeString(s []int64) string {
	b, _ := json.Marshal(s)
	if s == nil {
		return "[]"
	}
	return string(b)
}

func runLs(args []string, stdout, stderr io.Writer) int {
	if slices.Contains(args, "--stages") || slices.Contains(args, "-stages") {
		fl := flag.NewFlagSet("ls", flag.ContinueOnError)
		fl.Bool("stages", false, "list the stages kept for read-write mounts")
		ops, code := parseArgs("ls", fl, args, stderr)
		if code >= 0 {
			return code
		}
		if len(ops) != 1 {
			return badUsage("ls", stderr, "--stages needs FILE alone")
		}
		return listStages(ops[0], stdout, stderr)
	}
	f, file, version, _, code := openAtVersion(flag.NewFlagSet("ls", flag.ContinueOnError), "the version current at this time", args, stderr)
	if code >= 0 {
		return code
	}
	defer f.Close()
	rows, err := datasetRows(f, version)
	if err != nil {
		return fail(stderr, file, err)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r[0], r[1], r[2])
	}
	tw.Flush()
	return 0
}

// listStages prints the stages kept beside file.
func listStages(file string, stdout, stderr io.Writer) int {
	if _, err := os.Stat(file); err != nil {
		return fail(stderr, file, err)
	}
	list, err := stagedir.List(file)
	if err != nil {
		return fail(stderr, file, err)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	for _, s := range list {
		var what []string
		add := func(n int, label string) {
			if n > 0 {
				what = append(what, fmt.Sprintf("%d %s", n, label))
			}
		}
		add(len(s.Changed), "datasets changed")
		add(len(s.New), "new datasets")
		add(len(s.Removed), "removed")
		add(len(s.Groups), "new groups")
		add(len(s.Attrs), "with attributes changed")
		if len(what) == 0 {
			what = []string{"no changes"}
		}
		if s.Committing != "" {
			what = append(what, "its commit as "+s.Committing+" was under way: the next read-write mount removes it if that version exists")
		}
		on := s.Base
		if s.Branch != "" {
			on += " (branch " + s.Branch + ")"
		}
		fmt.Fprintf(tw, "%s\ton %s\t%s\n", s.Name, on, strings.Join(what, ", "))
	}
	tw.Flush()
	return 0
}

// splitSpec splits FILE[:REST] where FILE is the longest prefix naming an existing file.
func splitSpec(spec string) (file, rest string) {
	if _, err := os.Stat(spec); err == nil {
		return spec, ""
	}
	for i := len(spec) - 1; i > 0; i-- {
		if spec[i] == ':' {
			if _, err := os.Stat(spec[:i]); err == nil {
				return spec[:i], spec[i+1:]
			}
		}
	}
	if i := strings.IndexByte(spec, ':'); i > 0 {
		return spec[:i], spec[i+1:] // the file does not exist: Open reports it
	}
	return spec, ""
}

func runInfo(args []string, stdout, stderr io.Writer) int {
	boundHeap()
	fl := flag.NewFlagSet("info", flag.ContinueOnError)
	at := fl.String("at", "", "the version current at this time")
	ops, code := parseArgs("info", fl, args, stderr)
	if code >= 0 {
		return code
	}
	if len(ops) != 1 {
		return badUsage("info", stderr, "needs one FILE[:VERSION[/DATASET|/GROUP]]")
	}
	file, rest := splitSpec(ops[0])
	f, err := versions.Open(file)
	if err != nil {
		return fail(stderr, file, err)
	}
	defer f.Close()
	if !f.Versioned() && (rest != "" || *at != "") {
		return fail(stderr, file, errNotVersioned)
	}
	if rest == "" && *at == "" {
		if err := fileInfo(stdout, f, file); err != nil {
			return fail(stderr, file, err)
		}
		return 0
	}
	var name, ds string
	if *at != "" {
		ds = strings.Trim(rest, "/")
	} else {
		name, ds, _ = strings.Cut(strings.Trim(rest, "/"), "/")
	}
	version, err := resolveVersion(f, name, *at)
	if err != nil {
		return fail(stderr, file, err)
	}
	switch k, kerr := f.Kind(versions.InVersion(version, ds)); {
	case ds == "":
		err = versionInfo(stdout, f, version)
	case kerr == nil && k == h5.KindGroup:
		err = groupInfo(stdout, f, version, ds)
	default: // a dataset, or nothing: datasetInfo says which
		err = datasetInfo(stdout, f, version, ds)
	}
	if err != nil {
		return fail(stderr, file, err)
	}
	return 0
}

func fileInfo(w io.Writer, f *versions.File, file string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	defer tw.Flush()
	fmt.Fprintf(tw, "file:\t%s\n", file)
	if !f.Versioned() {
		fmt.Fprintf(tw, "versioned:\tno (plain HDF5)\n")
		return nil
	}
	vs, err := f.Versions()
	if err != nil {
		return err
	}
	cur, err := f.CurrentVersion()
	if err != nil {
		return err
	}
	fmt.Fprintf(tw, "data_version:\t%d\n", f.DataVersion())
	fmt.Fprintf(tw, "current version:\t%s\n", orNone(cur))
	fmt.Fprintf(tw, "versions:\t%d\n", len(vs))
	if cur == "" {
		fmt.Fprintf(tw, "datasets:\t0\n")
		return nil
	}
	rows, err := datasetRows(f, cur)
	if err != nil {
		return err
	}
	fmt.Fprintf(tw, "datasets:\t%d\n", len(rows))
	for _, r := range rows {
		fmt.Fprintf(tw, "  %s\t%s %s\n", r[0], r[1], r[2])
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func versionInfo(w io.Writer, f *versions.File, version string) error {
	v, _, err := f.Version(version)
	if err != nil {
		return err
	}
	rows, err := datasetRows(f, version)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	defer tw.Flush()
	fmt.Fprintf(tw, "version:\t%s\n", v.Name)
	fmt.Fprintf(tw, "timestamp:\t%s\n", v.Timestamp)
	prev := v.PrevVersion
	if prev == "" {
		prev = versions.FirstVersion
	}
	fmt.Fprintf(tw, "parent:\t%s\n", prev)
	fmt.Fprintf(tw, "datasets:\t%d\n", len(rows))
	for _, r := range rows {
		fmt.Fprintf(tw, "  %s\t%s %s\n", r[0], r[1], r[2])
	}
	return nil
}

// groupInfo describes a group of a version: its attributes, then its datasets (dtype and
// shape, as ls lists them) and its groups.
func groupInfo(w io.Writer, f *versions.File, version, grp string) error {
	p := versions.InVersion(version, grp)
	attrs, err := f.Attrs(p)
	if err != nil {
		return err
	}
	entries, err := f.List(p)
	if err != nil {
		return err
	}
	var datasets [][3]string
	var groups []string
	for _, e := range entries {
		if e.IsGroup {
			groups = append(groups, e.Name+"/")
			continue
		}
		d, err := f.Dataset(p + "/" + e.Name)
		if err != nil {
			return fmt.Errorf("%s/%s: %w", grp, e.Name, err)
		}
		datasets = append(datasets, [3]string{e.Name, dtypeName(d.Type), shapeString(d.Shape)})
	}
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	defer tw.Flush()
	fmt.Fprintf(tw, "version:\t%s\n", version)
	fmt.Fprintf(tw, "group:\t%s\n", grp)
	fmt.Fprintf(tw, "attributes:\t%d\n", len(attrs))
	for _, a := range attrs {
		text, err := h5json.AttrText(a)
		if err != nil {
			return fmt.Errorf("%s: attribute %s: %w", grp, a.Name, err)
		}
		fmt.Fprintf(tw, "  %s\t%s\n", a.Name, text)
	}
	fmt.Fprintf(tw, "datasets:\t%d\n", len(datasets))
	for _, r := range datasets {
		fmt.Fprintf(tw, "  %s\t%s %s\n", r[0], r[1], r[2])
	}
	fmt.Fprintf(tw, "groups:\t%d\n", len(groups))
	for _, g := range groups {
		fmt.Fprintf(tw, "  %s\n", g)
	}
	return nil
}

func datasetInfo(w io.Writer, f *versions.File, version, ds string) error {
	d, err := f.VersionDataset(version, ds)
	if errors.Is(err, versions.ErrNotFound) {
		return fmt.Errorf("version %s has no dataset %q", version, ds)
	} else if err != nil {
		return err
	}
	v, _, err := f.Version(version)
	if err != nil {
		return err
	}
	fill := `""` // variable-length strings: the empty string
	if !d.Strings {
		fill = h5json.FillText(d.Type.DType, d.Fill)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	defer tw.Flush()
	fmt.Fprintf(tw, "version:\t%s\n", version)
	fmt.Fprintf(tw, "dataset:\t%s\n", ds)
	fmt.Fprintf(tw, "dtype:\t%s\n", dtypeName(d.Type))
	fmt.Fprintf(tw, "shape:\t%s\n", shapeString(d.Shape))
	if d.Chunks != nil {
		fmt.Fprintf(tw, "chunks:\t%s\n", shapeString(d.Chunks))
	} else {
		fmt.Fprintf(tw, "chunks:\t(contiguous)\n")
	}
	fmt.Fprintf(tw, "filters:\t%s\n", filterString(d.Filters))
	fmt.Fprintf(tw, "fill value:\t%s\n", fill)
	if d.RawData != "" {
		fmt.Fprintf(tw, "raw_data:\t%s\n", d.RawData)
	}
	total, stored, shared, ok, err := inspect.ChunkStats(f, version, ds)
	if err != nil {
		return err
	}
	if ok {
		fmt.Fprintf(tw, "chunks stored:\t%d of %d\n", stored, total)
		if v.PrevVersion == "" {
			fmt.Fprintf(tw, "shared with parent:\t%d (parent %s)\n", shared, versions.FirstVersion)
		} else {
			fmt.Fprintf(tw, "shared with parent:\t%d of %d (parent %s)\n", shared, stored, v.PrevVersion)
		}
	}
	return nil
}

func filterString(fs []h5.Filter) string {
	if len(fs) == 0 {
		return "none"
	}
	var parts []string
	for _, flt := range fs {
		name := map[int]string{1: "gzip", 2: "shuffle", 3: "fletcher32", 4: "szip", 5: "nbit", 6: "scaleoffset", 32000: "lzf"}[flt.ID]
		if name == "" {
			name = fmt.Sprintf("filter %d (%s)", flt.ID, flt.Name)
		}
		if flt.ID == 1 && len(flt.Params) > 0 {
			name += fmt.Sprintf(" level %d", flt.Params[0])
		}
		parts = append(parts, name)
	}
	return strings.Join(parts, ", ")
}

func runDiff(args []string, stdout, stderr io.Writer) int {
	boundHeap()
	fl := flag.NewFlagSet("diff", flag.ContinueOnError)
	verbose := fl.Bool("v", false, "chunk detail")
	asJSON := fl.Bool("json", false, "one JSON object")
	ops, code := parseArgs("diff", fl, args, stderr)
	if code >= 0 {
		return code
	}
	if *asJSON && *verbose {
		return badUsage("diff", stderr, "-v and --json together")
	}
	if len(ops) < 3 || len(ops) > 4 {
		return badUsage("diff", stderr, "needs FILE V1 V2 [DATASET]")
	}
	file := ops[0]
	f, err := openVersioned(file)
	if err != nil {
		return fail(stderr, file, err)
	}
	defer f.Close()
	for i := 1; i <= 2; i++ {
		if ops[i], err = resolveVersion(f, ops[i], ""); err != nil {
			return fail(stderr, file, err)
		}
	}
	ds := ""
	if len(ops) == 4 {
		ds = strings.Trim(ops[3], "/")
		// By kind, not by loading either version's chunk map: diff holds one at a time.
		if !isDataset(f, ops[1], ds) && !isDataset(f, ops[2], ds) {
			return fail(stderr, file, fmt.Errorf("no dataset %q in %s or %s", ds, ops[1], ops[2]))
		}
	}
	diffs, err := inspect.DiffVersions(f, ops[1], ops[2], ds)
	if err != nil {
		return fail(stderr, file, err)
	}
	attrs, err := inspect.AttrChanges(f, ops[1], ops[2], ds)
	if err != nil {
		return fail(stderr, file, err)
	}
	out := diffJSON{From: ops[1], To: ops[2], Datasets: []datasetDiffJSON{}, Attributes: newAttrJSON(attrs)}
	for _, dd := range diffs {
		ed, err := inspect.DiffElements(f, ops[1], ops[2], dd)
		if err != nil {
			return fail(stderr, file, err)
		}
		if *asJSON {
			out.Datasets = append(out.Datasets, newDatasetDiffJSON(dd, ed))
			continue
		}
		printDiff(stdout, dd, ed, *verbose)
	}
	if *asJSON {
		return printJSON(stdout, stderr, file, out)
	}
	for _, a := range attrs {
		fmt.Fprintf(stdout, "%s: attribute %s\n", objectName(a.Path), attrChangeText(a))
	}
	return 0
}

// isDataset reports whether version holds a dataset at rel.
func isDataset(f *versions.File, version, rel string) bool {
	v, ok, err := f.Version(version)
	if err != nil || !ok {
		return false
	}
	k, err := f.Kind(v.Path() + "/" + rel)
	return err == nil && k == h5.KindDataset
}

// diffJSON is diff --json's object.
type diffJSON struct {
	From       string            `json:"from"`
	To         string            `json:"to"`
	Datasets   []datasetDiffJSON `json:"datasets"`
	Attributes []attrJSON        `json:"attributes"`
}

type datasetDiffJSON struct {
	Path     string  `json:"path"`
	Change   string  `json:"change"`
	OldShape []int64 `json:"old_shape"`
	NewShape []int64 `json:"new_shape"`
	// Element counts, where the dtype and the number of axes let elements correspond.
	Changed  *int64 `json:"elements_changed,omitempty"`
	Compared *int64 `json:"elements_compared,omitempty"`
	Added    *int64 `json:"elements_added,omitempty"`
	Removed  *int64 `json:"elements_removed,omitempty"`
}

func newDatasetDiffJSON(dd inspect.DatasetDiff, ed inspect.ElementDiff) datasetDiffJSON {
	j := datasetDiffJSON{Path: dd.Path, Change: dd.Kind, OldShape: dd.Shape1, NewShape: dd.Shape2}
	if j.Change == "" {
		j.Change = "unchanged"
	}
	if dd.Kind == inspect.Modified && !ed.Incomparable {
		j.Changed, j.Compared, j.Added, j.Removed = &ed.Changed, &ed.Compared, &ed.Added, &ed.Removed
	}
	return j
}

// printDiff prints a dataset's line: what changed in its elements; with verbose, the
// chunk detail under it.
func printDiff(w io.Writer, dd inspect.DatasetDiff, ed inspect.ElementDiff, verbose bool) {
	switch dd.Kind {
	case inspect.Added:
		fmt.Fprintf(w, "%s: added, shape %s\n", dd.Path, shapeString(dd.Shape2))
		return
	case inspect.Removed:
		fmt.Fprintf(w, "%s: removed, shape %s\n", dd.Path, shapeString(dd.Shape1))
		return
	case "":
		fmt.Fprintf(w, "%s: unchanged, shape %s\n", dd.Path, shapeString(dd.Shape2))
		return
	}
	line := fmt.Sprintf("%s: ", dd.Path)
	// Strings can be long: their values only with -v.
	values := verbose || !ed.Strings
	switch {
	case ed.Incomparable:
		line += "dtype or number of axes changed"
	default:
		line += fmt.Sprintf("%d of %d elements changed", ed.Changed, ed.Compared)
		if ed.Changed > 0 && ed.Old.String() != "" && values {
			line += fmt.Sprintf(" (old %s, new %s)", ed.Old, ed.New)
		}
	}
	if shapeString(dd.Shape1) != shapeString(dd.Shape2) {
		line += fmt.Sprintf("; shape %s -> %s", shapeString(dd.Shape1), shapeString(dd.Shape2))
		if !ed.Incomparable {
			added, removed := "", ""
			if values {
				added, removed = valuesNote(ed.AddedRange), valuesNote(ed.RemovedRange)
			}
			line += fmt.Sprintf(", %d added%s, %d removed%s", ed.Added, added, ed.Removed, removed)
		}
	}
	fmt.Fprintln(w, line)
	if !verbose {
		return
	}
	fmt.Fprintf(w, "  %d of %d chunks differ (decided by: same raw_data slot %d, equal hash-table digest %d, different digest %d, reading the data %d)\n",
		dd.NumChanged(), dd.Total, dd.SameSlot, dd.SameDigest, dd.DiffDigest, dd.ReadData)
	for c := range dd.Changes() {
		var grid, rng []string
		for i := range c.Start {
			if c.Grid != nil {
				grid = append(grid, fmt.Sprint(c.Grid[i]))
			}
			rng = append(rng, fmt.Sprintf("%d:%d", c.Start[i], c.Stop[i]))
		}
		g := "(" + strings.Join(grid, ",") + ")"
		if c.Grid == nil {
			g = "(all)"
		}
		fmt.Fprintf(w, "  chunk %s [%s] %s\n", g, strings.Join(rng, ", "), c.Kind)
	}
}

// valuesNote is " (values R)" for a range with values, else "".
func valuesNote(r inspect.ValueRange) string {
	if r.String() == "" {
		return ""
	}
	return " (values " + r.String() + ")"
}

func runFsck(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("fsck", flag.ContinueOnError)
	repair := fl.Bool("repair", false, "first complete a commit that was interrupted")
	discard := fl.Bool("discard-journal", false, "with --repair: drop an interrupted commit's journal instead")
	ops, code := parseArgs("fsck", fl, args, stderr)
	if code >= 0 {
		return code
	}
	if len(ops) != 1 {
		return badUsage("fsck", stderr, "needs one FILE")
	}
	file := ops[0]
	if *discard && !*repair {
		return badUsage("fsck", stderr, "--discard-journal needs --repair")
	}
	switch {
	case *discard:
		found, err := h5.DiscardJournal(file)
		if err != nil {
			return fail(stderr, file, err)
		}
		if found {
			fmt.Fprintf(stdout, "%s: removed the journal of an interrupted commit without completing it\n", file)
		}
	case *repair:
		done, err := h5.Recover(file)
		if err != nil {
			return fail(stderr, file, err)
		}
		if done != h5.RecoveryNone {
			fmt.Fprintf(stdout, "%s: %s\n", file, done)
		}
		if code := reclaimPending(file, stdout, stderr); code != 0 {
			return code
		}
	}
	var progress func(string, int64, int64)
	bar := &progressBar{w: stderr, name: "fsck"}
	if isTerminal(stderr) {
		progress = bar.update
	}
	findings, err := fsck.CheckProgress(file, progress)
	bar.clear()
	if err != nil {
		return fail(stderr, file, err)
	}
	note, err := fsck.PendingNote(file)
	if err != nil {
		return fail(stderr, file, err)
	}
	if note != "" {
		fmt.Fprintf(stdout, "%s: %s\n", file, note)
	}
	if len(findings) > 0 {
		for _, fd := range findings {
			fmt.Fprintf(stdout, "%s: %s\n", file, fd)
		}
		fmt.Fprintf(stderr, "vh5fs: %s: %d problem(s) found\n", file, len(findings))
		return 1
	}
	f, err := openVersioned(file)
	if err != nil {
		return fail(stderr, file, err)
	}
	defer f.Close()
	vs, err := f.Versions()
	if err != nil {
		return fail(stderr, file, err)
	}
	notes, err := fsck.NameNotes(f)
	if err != nil {
		return fail(stderr, file, err)
	}
	for _, n := range notes {
		fmt.Fprintf(stdout, "%s: %s\n", file, strings.ReplaceAll(n, "FILE", file))
	}
	fmt.Fprintf(stdout, "ok: %d versions checked\n", len(vs))
	return 0
}

var changeLetter = map[string]string{inspect.Added: "A", inspect.Modified: "M", inspect.Removed: "D"}

// logAll prints every version with the history graph, newest first.
func logAll(f *versions.File, file string, limit int, stdout, stderr io.Writer) int {
	vs, err := f.Versions()
	if err != nil {
		return fail(stderr, file, err)
	}
	refs, err := named.Read(f.HDF5())
	if err != nil {
		return fail(stderr, file, err)
	}
	cur, _ := f.CurrentVersion()
	known := map[string]bool{}
	for _, v := range vs {
		known[v.Name] = true
	}
	shown := 0
	for _, r := range historyGraph(vs, cur) {
		v := r.Version
		if v.Name == "" {
			fmt.Fprintln(stdout, r.Graph)
			continue
		}
		if limit > 0 && shown == limit {
			break
		}
		shown++
		from := v.PrevVersion
		if !known[from] {
			from = ""
		}
		changes, attrs, err := versionChanges(f, from, v.Name)
		if err != nil {
			return fail(stderr, file, err)
		}
		mark := decoration(v, cur, refs)
		if v.PrevVersion != "" && !known[v.PrevVersion] {
			mark += fmt.Sprintf(" (parent %s missing)", v.PrevVersion)
		}
		fmt.Fprintf(stdout, "%s %s  %s  %s%s\n", r.Graph, v.Name, v.Timestamp, changedCount(len(changes), len(attrs)), mark)
	}
	return 0
}
