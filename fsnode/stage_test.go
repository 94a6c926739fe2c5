package fsnode

import (
	"context"
	"path"
	"strings"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/vh5fs/vh5fs/internal/conform"
	"github.com/vh5fs/vh5fs/internal/fixture"
	"github.com/vh5fs/vh5fs/xattrs"
)

// applyNodeOps applies the golden's file operations to the stage directory st through its
// nodes, as the kernel turns tests/'s system calls (open+pwrite, truncate, touch+setfattr,
// rm, mkdir, setfattr) into requests.
func applyNodeOps(t *testing.T, st fs.InodeEmbedder, ops []fixture.StageOp) {
	t.Helper()
	ctx := context.Background()
	for _, op := range ops {
		dir, name := path.Split(op.Path)
		parent := func() *stageDirNode {
			n, ok := walk(t, st, strings.TrimSuffix(dir, "/")).(*stageDirNode)
			require.True(t, ok, "%s: parent is not a stage directory", op.Path)
			return n
		}
		var errno syscall.Errno
		switch op.Op {
		case "pwrite":
			b, err := op.Data()
			require.NoError(t, err)
			n := walk(t, st, op.Path).(*stageFileNode)
			fh, _, errno := n.Open(ctx, syscall.O_RDWR)
			require.Zero(t, errno, "open %s", op.Path)
			w, errno := n.Write(ctx, fh, b, op.Offset)
			require.Zero(t, errno, "write %s", op.Path)
			require.EqualValues(t, len(b), w)
		case "truncate":
			in := &fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{Valid: fuse.FATTR_SIZE, Size: uint64(op.Size)}}
			errno = walk(t, st, op.Path).(*stageFileNode).Setattr(ctx, nil, in, &fuse.AttrOut{})
		case "create":
			var out fuse.EntryOut
			in, _, _, cerr := parent().Create(ctx, name, syscall.O_CREAT|syscall.O_WRONLY, 0o644, &out)
			require.Zero(t, cerr, "create %s", op.Path)
			errno = in.Operations().(*stageFileNode).Setxattr(ctx, XattrCreate, op.Spec, 0)
		case "rm":
			errno = parent().Unlink(ctx, name)
		case "mkdir":
			_, errno = parent().Mkdir(ctx, name, 0o755, &fuse.EntryOut{})
		case "setattr":
			errno = walk(t, st, op.Path).(fs.NodeSetxattrer).Setxattr(ctx, xattrs.HDF5Prefix+op.Name, []byte(op.JSON), 0)
		default:
			t.Fatalf("unknown op %q", op.Op)
		}
		require.Zero(t, errno, "%s %s", op.Op, op.Path)
	}
}

// TestStageNodes: golden_stage_multi's file operations made on stage/golden through the
// nodes, and the stage renamed into versions/, give the version versioned-hdf5 wrote for
// the same change; a taken name is EEXIST for mkdir and for the commit, and the stage stays
// until it is committed; two handles of a dataset in a stage share its writes.
func TestStageNodes(t *testing.T) {
	ctx := context.Background()
	g, err := fixture.StageGolden()
	require.NoError(t, err)
	file := fixture.Copy(t, g.Before)
	e := newEngine(t, file, true)
	stages := walk(t, e.root, "stage").(*stagesNode)
	vers := walk(t, e.root, "versions").(*versionsNode)

	_, errno := stages.Mkdir(ctx, g.BaseVersion, 0o755, &fuse.EntryOut{})
	require.Equal(t, syscall.EEXIST, errno, "a version's name")
	in, errno := stages.Mkdir(ctx, "golden", 0o755, &fuse.EntryOut{})
	require.Zero(t, errno)
	st := in.Operations()
	applyNodeOps(t, st, g.Ops)

	// Every open of a dataset in a stage shares one state; fsync does not commit.
	in, errno = stages.Mkdir(ctx, "shared", 0o755, &fuse.EntryOut{})
	require.Zero(t, errno)
	n := walk(t, in.Operations(), "prices").(*stageFileNode)
	wfh, _, errno := n.Open(ctx, syscall.O_WRONLY)
	require.Zero(t, errno)
	rfh, _, errno := n.Open(ctx, syscall.O_RDONLY)
	require.Zero(t, errno)
	_, errno = n.Write(ctx, wfh, []byte("8 bytes!"), 3)
	require.Zero(t, errno)
	require.Zero(t, n.Fsync(ctx, wfh, 0))
	res, errno := n.Read(ctx, rfh, make([]byte, 8), 3)
	require.Zero(t, errno)
	got, _ := res.Bytes(make([]byte, 8))
	require.Equal(t, "8 bytes!", string(got), "another handle reads the write")
	res.Done()
	require.Equal(t, g.BaseVersion, e.current(t), "fsync in a stage does not commit")

	require.Equal(t, syscall.EEXIST, stages.Rename(ctx, "golden", vers, g.BaseVersion, unix.RENAME_NOREPLACE))
	require.Equal(t, []string{"golden", "shared"}, e.m.stages.Names(), "a refused commit keeps the stage")
	require.Equal(t, g.BaseVersion, e.current(t))
	require.Zero(t, stages.Rename(ctx, "golden", vers, "golden", unix.RENAME_NOREPLACE))
	require.Equal(t, []string{"shared"}, e.m.stages.Names())
	require.Equal(t, "golden", e.current(t))
	e.close(t)
	require.NoError(t, conform.StageGolden(file, g))
}
