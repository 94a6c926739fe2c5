package fsnode

import (
	"log/slog"
	"time"
)

// The timeouts of every mount: how long the kernel may keep entries and attributes.
// Read-write mounts also give 0 to dataset files' attributes (datasetNode.attrTimeout)
// and to everything inside a stage (stage.go); the entries inside a branch have 0 in
// every mount (branches.go). Each node sets its own: the mount gives go-fuse no default,
// which would replace a 0 (mount.go).
const (
	// ImmutableTimeout is how long the kernel keeps the entries and attributes of
	// committed versions, which never change (the benchmark's loopback uses it too).
	ImmutableTimeout = time.Hour
	// mutableTimeout is that of nodes that can change: the root, versions/, current and
	// the plain tree.
	mutableTimeout = time.Second
	// liveTimeout replaces mutableTimeout in live mounts.
	liveTimeout time.Duration = 0
)

// Live mounts (-o live, versions.OpenLive). What changes here:
//
//   - Every request holds the file (versions.File.Hold) so that a reopen waits for it, and
//     every directory request (lookup, readdir, readlink, getattr of the root, versions/,
//     current and groups) first lets the file follow other processes' commits
//     (versions.File.Follow): new versions appear at the first such request after the
//     committing process closed the file.
//   - The kernel caches nothing that can change: entry, attribute and negative timeouts of
//     the root, versions/, current and the plain tree are 0 (liveTimeout), and the plain
//     tree's dataset files are opened with FOPEN_DIRECT_IO, so every read(2) and stat(2)
//     reaches vh5fs, which refreshes the dataset before answering. An open descriptor sees
//     the dataset grow: a read past the size it saw at open is answered from the new extent.
//     Committed versions keep their long attribute timeouts and page cache: their content
//     never changes. Their entries in versions/ have timeout 0 too, since another process
//     may delete or rename them (nodes inside a version carry its timestamp as their
//     generation, versionGen, so a version committed later under a freed name is new to
//     the kernel).
//   - Reads of the plain tree are never spliced from the file: libhdf5 reads them.

// hold marks a request in progress (see versions.File.Hold).
func (m *mount) hold() func() { return m.file.Hold() }

// follow lets a live file catch up with commits of other processes; errors are logged and
// show up as the failures of the requests that follow.
func (m *mount) follow() {
	if err := m.file.Follow(); err != nil {
		slog.Error("live: reopening the file failed", "file", m.file.Path(), "err", err)
	}
}

// enter is the start of a directory request: follow, then hold.
func (m *mount) enter() func() {
	if !m.live {
		return func() {}
	}
	m.follow()
	return m.hold()
}

// mutable is the timeout of nodes that can change: mutableTimeout, 0 in live mounts.
func (m *mount) mutable() time.Duration {
	if m.live {
		return liveTimeout
	}
	return mutableTimeout
}

// timeoutFor is the timeout of a node: ImmutableTimeout inside committed versions, else
// mutable().
func (m *mount) timeoutFor(immutable bool) time.Duration {
	if immutable {
		return ImmutableTimeout
	}
	return m.mutable()
}
