package main

// vh5fs tag and vh5fs branch: the file's names (package named, changed through history's
// Tag, Untag, Branch, MoveBranch and DeleteBranch). One implementation, two kinds.

import (
	"flag"
	"fmt"
	"io"

	"github.com/vh5fs/vh5fs/commit"
	"github.com/vh5fs/vh5fs/history"
	"github.com/vh5fs/vh5fs/named"
	"github.com/vh5fs/vh5fs/versions"
)

// nameKind is what differs between tags and branches in their command.
type nameKind struct {
	kind string                                          // "tag" or "branch"
	add  func(c *commit.Committer, name, v string) error // makes a name
	del  func(c *commit.Committer, name string) error    // deletes one
	move func(c *commit.Committer, name, v string) error // moves one (-f); nil: a name never moves
	list func(r named.Refs) map[string]named.Target
	// The reports of an addition (after the file, name and version as arguments 2 and 3), a move and a
	// deletion.
	added, moved, deleted string
}

var (
	tagKind = nameKind{kind: "tag", add: history.Tag, del: history.Untag,
		list: func(r named.Refs) map[string]named.Target { return r.Tags }, added: "tagged %[3]s %[2]s", deleted: "deleted tag"}
	branchKind = nameKind{kind: "branch", add: history.Branch, del: history.DeleteBranch, move: history.MoveBranch,
		list: func(r named.Refs) map[string]named.Target { return r.Branches }, added: "made branch %[2]s at %[3]s", moved: "moved branch", deleted: "deleted branch"}
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
another version of the same name. NAME: letters, digits, '.', '_' and '-'; tags and
branches share one set of names, and none takes a version's name (a version comes first
wherever a version is taken; fsck notes a name that a version committed later shadows).
The names live in an attribute of the versions group (vh5fs_refs) that versioned-hdf5
keeps; each change is one journaled sync. In a mount: MNT/tags/NAME links to
../versions/VERSION, and on read-write mounts 'ln -s versions/VERSION MNT/tags/NAME' and
'rm MNT/tags/NAME' tag and untag. log marks tagged versions (tag: NAME); ls, info, diff
and refs take a tag wherever they take a version. Refused while the file is mounted or
open elsewhere: tag through the mount then.
`, func(args []string, stdout, stderr io.Writer) int { return runNames(tagKind, args, stdout, stderr) }}
	commands["branch"] = command{`usage: vh5fs branch FILE NAME [VERSION]
       vh5fs branch -f FILE NAME VERSION
       vh5fs branch -d FILE NAME
       vh5fs branch -l FILE

Makes branch NAME with its head at VERSION (default: the current version). A branch is a
second current_version: writes through a mount's MNT/branches/NAME/ (and stages made on
it: setfattr -n user.vh5fs.branch -v NAME MNT/stage/S before changing it) commit on its
head and move the branch, not current_version, as versioned-hdf5's
stage_version(make_current=False) does; the library's own commits and current move on
their own. A branch's head is held as a tagged version is (delete, rmdir and the policies
keep it). -f moves an existing branch to VERSION; -d deletes branch NAME (its versions
stay); -l lists the branches and their heads. A branch whose head another program
deleted is dangling: listed as such, never followed, and refuses commits. NAME: as for
tags, with which branches share one set of names (never a version's name). In a mount,
MNT/branches/NAME/ is the head's tree, looked up anew at each path walk; on read-write
mounts 'mkdir MNT/branches/NAME' makes one at the current version, 'setfattr -n
user.vh5fs.head -v VERSION MNT/branches/NAME' moves it and 'rmdir MNT/branches/NAME'
deletes it. log marks heads (branch: NAME); ls, info, diff and refs take a branch
wherever they take a version. Refused while the file is mounted or open elsewhere:
change branches through the mount.
`, func(args []string, stdout, stderr io.Writer) int { return runNames(branchKind, args, stdout, stderr) }}
}

func runNames(k nameKind, args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet(k.kind, flag.ContinueOnError)
	del := fl.Bool("d", false, "delete the "+k.kind)
	list := fl.Bool("l", false, "list the "+k.kind+"s")
	var force *bool
	if k.move != nil {
		force = fl.Bool("f", false, "move an existing "+k.kind+" to VERSION")
	} else {
		force = new(bool)
	}
	ops, code := parseArgs(k.kind, fl, args, stderr)
	if code >= 0 {
		return code
	}
	switch {
	case btoi(*del)+btoi(*list)+btoi(*force) > 1:
		return badUsage(k.kind, stderr, "-d, -l and -f are alternatives")
	case *list && len(ops) != 1:
		return badUsage(k.kind, stderr, "-l takes FILE alone")
	case *del && len(ops) != 2:
		return badUsage(k.kind, stderr, "-d takes FILE and NAME")
	case *force && len(ops) != 3:
		return badUsage(k.kind, stderr, "-f takes FILE, NAME and VERSION")
	case !*del && !*list && (len(ops) < 2 || len(ops) > 3):
		return badUsage(k.kind, stderr, "needs FILE and NAME, and at most one VERSION")
	}
	file := ops[0]
	if *list {
		return listNames(k, file, stdout, stderr)
	}
	if err := named.CheckName(ops[1]); err != nil {
		return badUsage(k.kind, stderr, "%v", err)
	}
	if err := checkWritableFor(file, k.kind, "changing a "+k.kind, "no "+k.kind+" can be changed"); err != nil {
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
			return k.del(c, name)
		}
		if len(ops) == 3 {
			version = ops[2]
		} else if version, err = f.CurrentVersion(); err != nil {
			return err
		}
		if *force {
			return k.move(c, name, version)
		}
		return k.add(c, name, version)
	})
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		return fail(stderr, file, err)
	}
	switch {
	case *del:
		fmt.Fprintf(stdout, "%s: %s %s\n", file, k.deleted, name)
	case *force:
		fmt.Fprintf(stdout, "%s: %s %s to %s\n", file, k.moved, name, version)
	default:
		fmt.Fprintf(stdout, "%s: "+k.added+"\n", file, name, version)
	}
	return 0
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// listNames prints one line a name of k's kind: its name, its version and timestamp, and
// "dangling" for one whose version is gone.
func listNames(k nameKind, file string, stdout, stderr io.Writer) int {
	f, err := openVersioned(file)
	if err != nil {
		return fail(stderr, file, err)
	}
	defer f.Close()
	r, vs, err := history.Names(f)
	if err != nil {
		return fail(stderr, file, err)
	}
	m := k.list(r)
	for _, name := range named.Names(m) {
		t := m[name]
		state := ""
		if !named.Live(vs, t) {
			state = "  dangling: version " + t.Version + " of " + t.Timestamp + " is gone"
		}
		fmt.Fprintf(stdout, "%s\t%s\t%s%s\n", name, t.Version, t.Timestamp, state)
	}
	return 0
}
