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

// TestReadOnlyFiles: a dataset file that takes no writes (variable-length strings) answers
// alike in versions/ and in a stage: opening it for writing is EACCES, and a read-only
// open reads the same bytes through a handle that takes no writes (EBADF) and has nothing
// to flush, sync or release. Setting its shape is refused: EROFS in versions/ (the file
// is read-only), EINVAL in a stage for a value that is not a JSON list.
func TestReadOnlyFiles(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t, fixture.Copy(t, filepath.Join(fixture.Dir(), "strings.h5")), true)
	_, errno := walk(t, e.root, "stage").(*stagesNode).Mkdir(ctx, "s", 0o755, &fuse.EntryOut{})
	require.Zero(t, errno)
	before := e.current(t)
	var reads [][]byte
	for _, kind := range []struct {
		path     string
		badShape syscall.Errno
	}{
		{"versions/" + before + "/names", syscall.EROFS},
		{"stage/s/names", syscall.EINVAL},
	} {
		path := kind.path
		n, ok := walk(t, e.root, path).(fileOps)
		require.True(t, ok, "%s is not a dataset file", path)
		for _, tc := range []struct {
			name string
			op   func() syscall.Errno
			want syscall.Errno
		}{
			{"open for writing", func() syscall.Errno { _, _, errno := n.Open(ctx, syscall.O_RDWR); return errno }, syscall.EACCES},
			{"open with O_TRUNC", func() syscall.Errno { _, _, errno := n.Open(ctx, syscall.O_TRUNC); return errno }, syscall.EACCES},
			{"a shape that is not JSON", func() syscall.Errno { return n.Setxattr(ctx, xattrs.Shape, []byte("[1,"), 0) }, kind.badShape},
		} {
			t.Run(path+": "+tc.name, func(t *testing.T) { require.Equal(t, tc.want, tc.op()) })
		}
		t.Run(path+": a read-only open", func(t *testing.T) {
			fh, _, errno := n.Open(ctx, syscall.O_RDONLY)
			require.Zero(t, errno)
			res, errno := n.Read(ctx, fh, make([]byte, 64), 0)
			require.Zero(t, errno)
			b, _ := res.Bytes(make([]byte, 64))
			require.NotEmpty(t, b)
			reads = append(reads, append([]byte(nil), b...))
			res.Done()
			_, errno = n.Write(ctx, fh, []byte("x"), 0)
			require.Equal(t, syscall.EBADF, errno)
			require.Zero(t, n.Flush(ctx, fh))
			require.Zero(t, n.Fsync(ctx, fh, 0))
			require.Zero(t, n.Release(ctx, fh))
		})
	}
	require.Len(t, reads, 2)
	require.Equal(t, reads[0], reads[1], "the stage reads its base")
	require.Equal(t, before, e.current(t), "nothing committed")
}
