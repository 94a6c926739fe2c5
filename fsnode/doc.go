// Package fsnode is the FUSE face of vh5fs: go-fuse nodes that translate kernel requests
// into calls on the engines and map their errors to errno in one place (errno). Package
// versions gives the tree, and a READ is one call to it (versions.File.Read), whose
// chunkstore.Reply becomes the go-fuse reply in one switch; package xattrs renders the
// extended attributes; writes go to writefile handles and stages. It holds almost no state
// of its own; every node is a path into the HDF5 file plus what caching needs. The tree
// works without a kernel too (newMount; handle_test.go and stage_test.go drive it as the
// kernel would).
//
// The tree:
//
//	MNT/versions/<v>/...     one directory per committed version; groups are directories,
//	                         datasets are files of raw C-order bytes
//	MNT/current              symlink to versions/<current_version>
//	MNT/<path>               the file's plain (unversioned) groups and datasets;
//	                         _version_data itself is never shown
//
// A top-level plain object named "versions" or "current" is hidden by the entries above in
// a versioned file.
//
// Inode numbers are deterministic (a hash of the node's kind and HDF5 path), so the same
// object keeps its number across lookups and remounts.
//
// Caching. A committed version never changes, so everything under versions/<v> is served
// with long entry and attribute timeouts (ImmutableTimeout) and its files are opened with
// FOPEN_KEEP_CACHE: the kernel's page cache keeps their bytes across opens. The root, the
// versions directory and the current symlink can change when a version is committed, so
// they get short timeouts (mutableTimeout); so does the plain tree, which another process
// may change.
//
// Read-write mounts (-o rw) open every version's file with FOPEN_DIRECT_IO instead and keep
// attribute caching off for dataset files: a writer's handle stages changes of its own
// (writeHandle, dataset.go) that no other handle may see through shared pages; commits
// happen on fsync and close. Live mounts (-o live) cache nothing that can change. The
// timeouts of every kind of mount, and what live mounts do instead, are in timeouts.go.
//
// Lock ordering: the handle's, then commit.Committer's, then versions.File's, then the
// HDF5 lock; the whole order is docs/ARCHITECTURE.md's table.
package fsnode
