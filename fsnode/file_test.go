package fsnode

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/fixture"
	"github.com/vh5fs/vh5fs/xattrs"
)

// fileOps is what the kernel asks of a dataset's file, in versions/ and in a stage.
type fileOps interface {
	fs.NodeOpener
	fs.NodeReader
	fs.NodeWriter
	fs.NodeFlusher
	fs.NodeFsyncer
	fs.NodeReleaser
	fs.NodeSetxattrer
}

// TestStringFiles: a variable-length string dataset's file answers alike in versions/ and
// in a stage: it opens for writing, a read-only open and a write handle read the same
// text, a write handle's text is its own until committed, and its shape cannot be set
// (its lines set it): EINVAL.
func TestStringFiles(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t, fixture.Copy(t, filepath.Join(fixture.Dir(), "strings.h5")), true)
	_, errno := walk(t, e.root, "stage").(*stagesNode).Mkdir(ctx, "s", 0o755, &fuse.EntryOut{})
	require.Zero(t, errno)
	before := e.current(t)
	var reads [][]byte
	for _, path := range []string{"versions/" + before + "/names", "stage/s/names"} {
		n, ok := walk(t, e.root, path).(fileOps)
		require.True(t, ok, "%s is not a dataset file", path)
		read := func(fh fs.FileHandle) []byte {
			res, errno := n.Read(ctx, fh, make([]byte, 256), 0)
			require.Zero(t, errno)
			b, _ := res.Bytes(make([]byte, 256))
			res.Done()
			return append([]byte(nil), b...)
		}
		ro, _, errno := n.Open(ctx, syscall.O_RDONLY)
		require.Zero(t, errno, path)
		rw, _, errno := n.Open(ctx, syscall.O_RDWR)
		require.Zero(t, errno, "%s opens for writing", path)
		text := read(ro)
		require.NotEmpty(t, text)
		require.Equal(t, text, read(rw), path)
		reads = append(reads, text)
		written, errno := n.Write(ctx, rw, []byte(`"Z"`), 0)
		require.Zero(t, errno)
		require.EqualValues(t, 3, written)
		require.NotEqual(t, text, read(rw), "%s: the write handle reads its write", path)
		require.Equal(t, syscall.EINVAL, n.Setxattr(ctx, xattrs.Shape, []byte("[3]"), 0), path)
		require.Zero(t, n.Release(ctx, ro))
	}
	require.Equal(t, reads[0], reads[1], "the stage reads its base")
}
