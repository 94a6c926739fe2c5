package fsnode

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestPassthroughRequests mounts a one-file filesystem whose open hands the kernel a
// backing file (FUSE passthrough, as a passthrough write handle does) and records which
// requests still reach the daemon. What it found is what the write handles are built on:
// READ and WRITE (and mmap's faults) never come; FLUSH comes at every close, FSYNC at
// fsync, SETATTR at ftruncate (the daemon must resize the backing file itself: the kernel
// does not), RELEASE at the last close; an O_TRUNC open truncates nothing by itself (the
// OPEN carries it). So the daemon sees when a handle may have changed (FLUSH, FSYNC,
// RELEASE) but never what changed, nor whether anything did.
func TestPassthroughRequests(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("FUSE passthrough needs CAP_SYS_ADMIN")
	}
	for _, tc := range []struct {
		name     string
		directIO bool
		daemonIO bool // READ and WRITE reach the daemon
	}{
		{"passthrough", false, false},
		// FOPEN_DIRECT_IO (every open of a read-write mount's versions) overrides
		// passthrough for read and write (not for mmap): a passthrough handle must not have it.
		{"passthrough with direct_io", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) { passthroughRequests(t, tc.directIO, tc.daemonIO) })
	}
}

// passthroughRequests runs the probe once: opens, writes, reads, mmap, fsync, ftruncate,
// stat, a duplicate's close and the last close.
func passthroughRequests(t *testing.T, directIO, daemonIO bool) {
	backing, err := os.CreateTemp(t.TempDir(), "backing")
	require.NoError(t, err)
	defer backing.Close()
	rec := &requestRecorder{backing: backing, counts: map[string]int{}, directIO: directIO}
	root := &probeRoot{rec: rec}
	mnt := t.TempDir()
	// As a read-write mount: O_TRUNC comes with the OPEN, every open is FOPEN_DIRECT_IO.
	srv, err := fs.Mount(mnt, root, &fs.Options{MountOptions: fuse.MountOptions{DirectMount: true,
		ExtraCapabilities: fuse.CAP_DIRECT_IO_ALLOW_MMAP | fuse.CAP_ATOMIC_O_TRUNC}})
	if err != nil {
		t.Skipf("cannot mount: %v", err)
	}
	defer srv.Unmount()
	probe, err := os.CreateTemp(t.TempDir(), "probe")
	require.NoError(t, err)
	defer probe.Close()
	if errno := probeBacking(srv, int(probe.Fd())); errno != 0 {
		t.Skipf("the kernel takes no backing files here: %v", errno)
	}

	path := filepath.Join(mnt, "f")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_TRUNC, 0)
	require.NoError(t, err)
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i)
	}
	_, err = f.WriteAt(data, 0)
	require.NoError(t, err)
	got := make([]byte, len(data))
	_, err = f.ReadAt(got, 0)
	require.NoError(t, err)
	require.Equal(t, data, got, "reads through the mount see the backing file")
	// With FOPEN_DIRECT_IO the daemon served the write; the mmap reaches the backing file
	// either way.
	m, err := unix.Mmap(int(f.Fd()), 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	require.NoError(t, err)
	m[0] = 0xAB
	require.NoError(t, unix.Munmap(m))
	onBacking := make([]byte, 1)
	_, err = backing.ReadAt(onBacking, 0)
	require.NoError(t, err)
	require.Equal(t, byte(0xAB), onBacking[0], "mmap writes reach the backing file")

	before := rec.snapshot()
	require.NoError(t, f.Sync())
	require.Equal(t, before["FSYNC"]+1, rec.snapshot()["FSYNC"], "fsync reaches the daemon")
	require.NoError(t, f.Truncate(4096))
	require.Equal(t, before["SETATTR"]+1, rec.snapshot()["SETATTR"], "ftruncate reaches the daemon")
	st, err := f.Stat()
	require.NoError(t, err)
	require.EqualValues(t, 4096, st.Size())
	dup, err := unix.Dup(int(f.Fd()))
	require.NoError(t, err)
	require.NoError(t, unix.Close(dup))
	require.Equal(t, before["FLUSH"]+1, rec.snapshot()["FLUSH"], "each close flushes")
	require.Zero(t, rec.snapshot()["RELEASE"], "not the last close")
	require.NoError(t, f.Close())
	rec.waitRelease()

	after := rec.snapshot()
	io := 0
	if daemonIO {
		io = 1 << 20 // at least one request, at most one a byte
	}
	for _, tc := range []struct {
		req      string
		atLeast  int
		atMost   int
		comments string
	}{
		{"OPEN", 1, 1, "the open"},
		{"READ", min(io, 1), io, "the kernel reads the backing file unless FOPEN_DIRECT_IO"},
		{"WRITE", min(io, 1), io, "the kernel writes the backing file unless FOPEN_DIRECT_IO"},
		{"FSYNC", 1, 1, "fsync reaches the daemon"},
		{"SETATTR", 1, 1, "ftruncate reaches the daemon"},
		{"FLUSH", 2, 2, "every close(2)"},
		{"RELEASE", 1, 1, "the last close"},
	} {
		t.Run(tc.req, func(t *testing.T) {
			require.GreaterOrEqual(t, after[tc.req], tc.atLeast, tc.comments)
			require.LessOrEqual(t, after[tc.req], tc.atMost, tc.comments)
		})
	}
}

// requestRecorder counts the requests the probe's file gets.
type requestRecorder struct {
	backing  *os.File
	directIO bool // opens answer FOPEN_DIRECT_IO
	mu       sync.Mutex
	counts   map[string]int // GUARDED_BY(mu)
	released chan struct{}
	once     sync.Once
}

func (r *requestRecorder) add(req string) {
	r.mu.Lock()
	r.counts[req]++
	r.mu.Unlock()
	if req == "RELEASE" {
		r.once.Do(func() { close(r.released) })
	}
}

func (r *requestRecorder) snapshot() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for k, v := range r.counts {
		out[k] = v
	}
	return out
}

// waitRelease waits for the RELEASE the kernel sends after the last close.
func (r *requestRecorder) waitRelease() { <-r.released }

type probeRoot struct {
	fs.Inode
	rec *requestRecorder
}

var _ fs.NodeOnAdder = (*probeRoot)(nil)

func (r *probeRoot) OnAdd(ctx context.Context) {
	r.rec.released = make(chan struct{})
	ch := r.NewPersistentInode(ctx, &probeFile{rec: r.rec}, fs.StableAttr{Mode: syscall.S_IFREG})
	r.AddChild("f", ch, false)
}

type probeFile struct {
	fs.Inode
	rec *requestRecorder
}

type probeHandle struct{ rec *requestRecorder }

var _ fs.FilePassthroughFder = (*probeHandle)(nil)

func (h *probeHandle) PassthroughFd() (int, bool) { return int(h.rec.backing.Fd()), true }

var (
	_ fs.NodeOpener    = (*probeFile)(nil)
	_ fs.NodeReader    = (*probeFile)(nil)
	_ fs.NodeWriter    = (*probeFile)(nil)
	_ fs.NodeFlusher   = (*probeFile)(nil)
	_ fs.NodeFsyncer   = (*probeFile)(nil)
	_ fs.NodeSetattrer = (*probeFile)(nil)
	_ fs.NodeReleaser  = (*probeFile)(nil)
	_ fs.NodeGetattrer = (*probeFile)(nil)
)

func (p *probeFile) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	p.rec.add("OPEN")
	if flags&syscall.O_TRUNC != 0 {
		if err := p.rec.backing.Truncate(0); err != nil {
			return nil, 0, fs.ToErrno(err)
		}
	}
	var fuseFlags uint32
	if p.rec.directIO {
		fuseFlags = fuse.FOPEN_DIRECT_IO
	}
	return &probeHandle{rec: p.rec}, fuseFlags, 0
}

func (p *probeFile) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	p.rec.add("READ")
	n, _ := p.rec.backing.ReadAt(dest, off)
	return fuse.ReadResultData(dest[:n]), 0
}

func (p *probeFile) Write(ctx context.Context, fh fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	p.rec.add("WRITE")
	n, err := p.rec.backing.WriteAt(data, off)
	return uint32(n), fs.ToErrno(err)
}

func (p *probeFile) Flush(ctx context.Context, fh fs.FileHandle) syscall.Errno {
	p.rec.add("FLUSH")
	return 0
}

func (p *probeFile) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	p.rec.add("FSYNC")
	return 0
}

func (p *probeFile) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	p.rec.add("SETATTR")
	if size, ok := in.GetSize(); ok {
		if err := p.rec.backing.Truncate(int64(size)); err != nil {
			return fs.ToErrno(err)
		}
	}
	return p.Getattr(ctx, fh, out)
}

func (p *probeFile) Release(ctx context.Context, fh fs.FileHandle) syscall.Errno {
	p.rec.add("RELEASE")
	return 0
}

func (p *probeFile) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	st, err := p.rec.backing.Stat()
	if err != nil {
		return fs.ToErrno(err)
	}
	out.Mode = syscall.S_IFREG | 0o644
	out.Size = uint64(st.Size())
	return 0
}
