package main

// vh5fs tag: names a version for good, holding it against deletions (package named,
// through history.Tag and Untag).

import (
	"flag"
	"fmt"
	"io"

	"github.com/vh5fs/vh5fs/commit"
	"github.com/vh5fs/vh5fs/history"
	"github.com/vh5fs/vh5fs/named"
	"github.com/vh5fs/vh5fs/versions"
)

func init() {
	commands["tag"] = command{`usage: vh5fs tag FILE NAME [VERSION]
       vh5fs tag -d FILE NAME
       vh5fs tag -l FILE

Names VERSION (default: the current version) NAME, for good: a tag never moves (tagging
a taken name is refused: delete the tag first), and holds its version: vh5fs delete,
rmdir through a mount and the --keep-last/--keep-every/--before policies never remove a
tagged version (a deletion naming it is refused, naming the tag; a policy keeps it besides
what it keeps). -d deletes tag NAME; -l lists the tags and the versions they name. A tag
whose version another program deleted is dangling: listed as such, and never followed to
another version of the same name. NAME: letters, digits, '.', '_' and '-'. The tags live in
an attribute of the versions group (vh5fs_refs) that versioned-hdf5 keeps; each change is
one journaled sync. In a mount: MNT/tags/NAME links to ../versions/VERSION, and on
read-write mounts 'ln -s versions/VERSION MNT/tags/NAME' and 'rm MNT/tags/NAME' tag and
untag. log marks tagged versions (tag: NAME); ls, info, diff and refs take a tag wherever
they take a version. Refused while the file is mounted or open elsewhere: tag through the
mount then.
`, runTag}
}

func runTag(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("tag", flag.ContinueOnError)
	del := fl.Bool("d", false, "delete the tag")
	list := fl.Bool("l", false, "list the tags")
	ops, code := parseArgs("tag", fl, args, stderr)
	if code >= 0 {
		return code
	}
	switch {
	case *del && *list:
		return badUsage("tag", stderr, "-d and -l are alternatives")
	case *list && len(ops) != 1:
		return badUsage("tag", stderr, "-l takes FILE alone")
	case *del && len(ops) != 2:
		return badUsage("tag", stderr, "-d takes FILE and NAME")
	case !*del && !*list && (len(ops) < 2 || len(ops) > 3):
		return badUsage("tag", stderr, "needs FILE and NAME, and at most one VERSION")
	}
	file := ops[0]
	if *list {
		return listTags(file, stdout, stderr)
	}
	if err := named.CheckName(ops[1]); err != nil {
		return badUsage("tag", stderr, "%v", err)
	}
	if err := checkWritableFor(file, "tag", "tagging", "no tag can be changed"); err != nil {
		fmt.Fprintf(stderr, "vh5fs: %v\n", err)
		return 1
	}
	f, err := versions.OpenRW(file)
	if err == nil && !f.Versioned() {
		f.Close()
		err = errNotVersioned
	}
	if err != nil {
		return fail(stderr, file, err)
	}
	defer f.Close()
	name := ops[1]
	var version string
	err = writeSide(f, func(c *commit.Committer) error {
		if *del {
			return history.Untag(c, name)
		}
		if len(ops) == 3 {
			version = ops[2]
		} else if version, err = f.CurrentVersion(); err != nil {
			return err
		}
		return history.Tag(c, name, version)
	})
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		return fail(stderr, file, err)
	}
	if *del {
		fmt.Fprintf(stdout, "%s: deleted tag %s\n", file, name)
	} else {
		fmt.Fprintf(stdout, "%s: tagged %s %s\n", file, version, name)
	}
	return 0
}

// listTags prints one line a tag: its name, its version and timestamp, and "dangling"
// for one whose version is gone.
func listTags(file string, stdout, stderr io.Writer) int {
	f, err := openVersioned(file)
	if err != nil {
		return fail(stderr, file, err)
	}
	defer f.Close()
	r, vs, err := history.Names(f)
	if err != nil {
		return fail(stderr, file, err)
	}
	for _, name := range named.Names(r.Tags) {
		t := r.Tags[name]
		state := ""
		if !named.Live(vs, t) {
			state = "  dangling: version " + t.Version + " of " + t.Timestamp + " is gone"
		}
		fmt.Fprintf(stdout, "%s\t%s\t%s%s\n", name, t.Version, t.Timestamp, state)
	}
	return 0
}
