package fsnode

import (
	"context"
	"log/slog"
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/vh5fs/vh5fs/versions"
)

// Changes to the tree. A committed version is a snapshot, as ZFS's .zfs/snapshot/<s> is:
// every change inside versions/<v>/ (unlink, rmdir, rename, create, mkdir, links, chmod,
// chown, attributes) answers EROFS, and nothing is ever only hidden. Elsewhere the tree's
// shape is fixed: the root, the plain tree and versions/ itself answer EROFS in read-only
// mounts and EPERM in read-write ones (renaming a version, moving current, deleting a
// version with -o allow_delete and the stage tree are the exceptions, in manage.go,
// current.go, delete.go and stage.go). Each refusal in a read-write mount is logged, so
// that the user of a background mount can find why: with the path as the user named it
// (versions/v2/x, not the HDF5 path) and what to do instead. (go-fuse answers 0 for an
// unlink or rmdir a node does not implement: without these, `rm` would report success and
// change nothing.)

// refuse is the answer to a change of the tree: op names it in the log, path is the
// HDF5 path (or "stage/..."), shown as the mount-relative path the user gave.
func (m *mount) refuse(op, path string) syscall.Errno {
	if m.commit == nil {
		return syscall.EROFS
	}
	mp := mountPath(path)
	slog.Warn("refused: "+m.refusal(op, mp), "op", op, "path", mp)
	return refusedErrno(op, mp)
}

// refusedErrno is EROFS for a change inside a version (mp below versions/NAME or
// branches/NAME, or the directory's own modes), EPERM for any other change of the tree's
// shape.
func refusedErrno(op, mp string) syscall.Errno {
	rest, ok := strings.CutPrefix(mp, "versions/")
	if !ok {
		rest, ok = strings.CutPrefix(mp, branchesDir+"/") // a branch's tree is its head's
	}
	if ok && (strings.Contains(rest, "/") || op == "setattr") {
		return syscall.EROFS
	}
	return syscall.EPERM
}

// mountPath is an HDF5 path of the mount's tree as the user names it, relative to the
// mount point: /_version_data/versions/v2/counts is versions/v2/counts, /grp/x is grp/x,
// the root ".".
func mountPath(p string) string {
	if rest, ok := strings.CutPrefix(p, versions.VersionsGroup); ok && (rest == "" || rest[0] == '/') {
		return "versions" + rest
	}
	if p = strings.TrimPrefix(p, "/"); p == "" {
		return "."
	}
	return p
}

// refusal says why op on mp (a mount-relative path) is refused, and what to do instead.
func (m *mount) refusal(op, mp string) string {
	inVersions := mp == "versions" || strings.HasPrefix(mp, "versions/")
	switch {
	case op == "setattr":
		return "modes, owners and times are fixed (the mount's uid=, gid= and umask= options set them)"
	case mp == "stage" || strings.HasPrefix(mp, "stage/"):
		return "stage/ holds only stages: mkdir MNT/stage/NAME makes one, rm -r MNT/stage/NAME discards it, mv MNT/stage/NAME MNT/versions/ commits it"
	case mp == tagsDir || strings.HasPrefix(mp, tagsDir+"/"):
		return "tags/ holds only tags, which never move: ln -s versions/VERSION MNT/tags/NAME tags a version (read-write mounts), rm MNT/tags/NAME deletes the tag"
	case mp == branchesDir || strings.HasPrefix(mp, branchesDir+"/"):
		return "branches/ holds only branches: mkdir MNT/branches/NAME makes one at the current version (read-write mounts), setfattr -n " + XattrHead + " -v VERSION MNT/branches/NAME moves it, rmdir deletes it; a branch's files are written as a version's are"
	case mp == atDir || strings.HasPrefix(mp, atDir+"/"):
		return "at/TIME is the version current at TIME, looked up, never made: nothing in at/ changes"
	case !inVersions:
		return "the mount's root and the file's unversioned groups and datasets are read-only (versioned-hdf5 versions only what is under versions/)"
	}
	// instead is how the change is made in a stage (read-write mounts of versioned files).
	instead := func(how string) string {
		if m.stages == nil {
			return ""
		}
		return "; make changes in a stage: mkdir MNT/stage/NAME, " + how + ", then commit it as one version: mv MNT/stage/NAME MNT/versions/"
	}
	version := strings.Count(mp, "/") == 1 // versions/NAME itself
	const immutable = "versions are snapshots: nothing in them changes"
	switch op {
	case "unlink", "rmdir":
		if version {
			return deleteAdvice
		}
		return immutable + "; delete a whole version with vh5fs delete FILE VERSION" + instead("rm MNT/stage/NAME/PATH (rmdir for a group)")
	case "rename":
		if version {
			return "a version is renamed only within versions/ (mv MNT/versions/OLD MNT/versions/NEW); a stage is committed under the name it is given: mv MNT/stage/NAME MNT/versions/VERSION"
		}
		return immutable + ": nothing in them is renamed (in versioned-hdf5 a dataset at a new path is a new dataset)" +
			instead("cp MNT/stage/NAME/OLD MNT/stage/NAME/NEW and rm MNT/stage/NAME/OLD")
	case "mkdir":
		if version {
			return "a new version is made by committing a stage, not by mkdir in versions/" + instead("change MNT/stage/NAME/...")
		}
		return immutable + ": no new groups in them" + instead("mkdir MNT/stage/NAME/PATH")
	case "create", "mknod":
		return immutable + ": no new files in them (writing an existing dataset's bytes makes a new version)" +
			instead("touch or cp MNT/stage/NAME/PATH")
	case "link", "symlink":
		return "versions hold only groups and datasets, no links" + instead("cp a dataset to MNT/stage/NAME/PATH")
	}
	return immutable + instead("change MNT/stage/NAME/...")
}

// deleteAdvice is the refusal of rmdir MNT/versions/NAME without -o allow_delete.
const deleteAdvice = "deleting a version is deliberate: vh5fs delete FILE VERSION (-n shows what it would do), " +
	"or rmdir MNT/versions/VERSION on a mount with -o rw,allow_delete"

// frozenDir, embedded in every directory node kind, refuses every change to the
// directory's entries and attributes.
type frozenDir struct {
	fm   *mount
	path string // the directory's HDF5 path, for the log
}

func (d *frozenDir) refuse(op, name string) syscall.Errno {
	return d.fm.refuse(op, joinPath(d.path, name))
}

var (
	_ fs.NodeUnlinker  = (*frozenDir)(nil)
	_ fs.NodeRmdirer   = (*frozenDir)(nil)
	_ fs.NodeRenamer   = (*frozenDir)(nil)
	_ fs.NodeMkdirer   = (*frozenDir)(nil)
	_ fs.NodeCreater   = (*frozenDir)(nil)
	_ fs.NodeSymlinker = (*frozenDir)(nil)
	_ fs.NodeLinker    = (*frozenDir)(nil)
	_ fs.NodeMknoder   = (*frozenDir)(nil)
	_ fs.NodeSetattrer = (*frozenDir)(nil)
)

func (d *frozenDir) Unlink(ctx context.Context, name string) syscall.Errno {
	return d.refuse("unlink", name)
}

func (d *frozenDir) Rmdir(ctx context.Context, name string) syscall.Errno {
	return d.refuse("rmdir", name)
}

func (d *frozenDir) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	return d.refuse("rename", name)
}

func (d *frozenDir) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, d.refuse("mkdir", name)
}

// Create answers EROFS, the file system's own word for "no new files here".
func (d *frozenDir) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if d.fm.commit != nil {
		mp := mountPath(joinPath(d.path, name))
		slog.Warn("refused: "+d.fm.refusal("create", mp), "op", "create", "path", mp)
	}
	return nil, nil, 0, syscall.EROFS
}

// Symlink and Link are logged by the directory and the target the user named: the new
// name may be ln's own temporary one (ln -f over an existing name).
func (d *frozenDir) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, d.refuseLink("symlink", target)
}

func (d *frozenDir) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, d.refuseLink("link", target.EmbeddedInode().Path(nil))
}

func (d *frozenDir) refuseLink(op, target string) syscall.Errno {
	if d.fm.commit == nil {
		return syscall.EROFS
	}
	dir := mountPath(d.path)
	slog.Warn("refused: "+d.fm.refusal(op, dir), "op", op, "dir", dir, "target", target)
	return refusedErrno(op, dir+"/")
}

func (d *frozenDir) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, d.refuse("mknod", name)
}

// Setattr refuses chmod, chown and touch of a directory.
func (d *frozenDir) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return d.fm.refuse("setattr", d.path)
}
