// Package h5 is vh5fs's only door to libhdf5. It uses gonum.org/v1/hdf5 for files, groups
// and datasets, and C files for what gonum lacks: vh5.c has virtual-dataset mappings, fill
// values, filters, raw hyperslab reads in the file's own byte order, attribute decoding, the
// HDF5 error stack, and the LZF filter (id 32000) on top of liblzf; vh5_copy.c copies a
// file's objects into another (copy.go); vh5_live.c serves live, SWMR-reading mounts
// (live.go).
//
// Read-write files are opened through a redo-journal file driver (journal.go, and the C below):
// writes over bytes the file held at its last sync are held (in memory up to a budget, the
// rest in an unlinked spill file: memory stays bounded) until FlushSync, which
// makes the new bytes past the old end durable, records the old and new bytes of every
// range it will overwrite in a journal beside the file (the commit point), applies them and
// removes the journal; so neither a killed process nor a power loss leaves the file torn or
// takes back a commit (Recover, and OpenRW, roll an interrupted one forward, but never over
// bytes another program changed since). FlushBody splits a sync in two: what was written
// before it is applied and fsynced before what was written after it (a version's committed
// flag and current_version), so that other programs reading the file before a repair never
// meet a version shown as committed whose bytes are not in place.
// The driver's C is in three files, split where the reasons to change them differ, sharing
// vh5j_private.h: vh5j_driver.c is libhdf5's side (its callbacks, the held writes and their
// spill file), vh5j_sync.c the sync's steps and the journal they write, under the crash
// contract at its top, and vh5j_recover.c recovery, which still reads every journal an
// earlier version wrote.
// Through the same driver, CreateVirtual and CopyVirtual write long virtual-dataset mapping
// lists themselves instead of paying libhdf5's cost per mapping (mappings.go).
//
// Locking: libhdf5 is one global lock even in thread-safe builds, so every call into it goes
// through lock()/unlock() here, the only global of the project. The calling goroutine is
// pinned to its OS thread while it holds the lock because HDF5 keeps its error stack per
// thread: the message of a failed call must be read on the thread that made it.
//
// Errors: HDF5's automatic error printing is switched off at start-up; a failed call becomes
// an *Error carrying the operation, the object path and HDF5's own error-stack messages.
package h5
