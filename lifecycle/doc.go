// Package lifecycle changes which versions a versioned-hdf5 file holds: Delete removes
// versions as versioned-hdf5's delete_versions does, with the same result in the file.
//
// # What a deletion does
//
// For each data group P (every group under /_version_data holding raw_data, the versions
// group left out), in name order:
//
//   - if no deleted version holds P as a dataset with a non-empty axis 0, P is left alone
//     (its raw_data keeps chunks only deleted versions used, as the library leaves them);
//   - else, if no kept version holds P, the data group is unlinked;
//   - else the slots the kept versions map are kept: sorted by old slot, the j-th moves to
//     slot j (only those whose slot changes are written), raw_data shrinks to the kept
//     slots, hash_table is rewritten with one row per kept slot in new-slot order (old
//     digest, new start and stop) and largest_index, and every kept version's virtual
//     dataset whose mappings change is created again with the new source slots, its
//     shape, fill value and attributes (unlinked and replaced as the library does).
//
// Then every kept version whose prev_version was deleted is relinked to its nearest kept
// ancestor, current_version moves to the nearest kept ancestor of the current version,
// and the deleted version groups are unlinked. __first_version__ and unknown names are
// refused before anything is written, as are files the deletion cannot complete (a slot
// mapped with two extents, a kept slot without its hash row, chunks of variable-length
// types other than strings that would have to move): PlanDelete reads and checks
// everything first.
// Should a write fail anyway before the sync, Delete cancels every write of it
// (h5.File.Cancel): the file stays as it was.
//
// The deleted versions' virtual datasets are freed without libhdf5 decoding their mappings
// (h5.File.Unlink drops their lists first, for libhdf5's eyes only): the lists stay in the
// file as unreferenced bytes, as space HDF5 frees mostly does, until vh5fs compact. The
// relinks are written in place, before the unlinks free anything: a half-applied body then
// never shows a kept version's attributes half moved.
//
// Chunks move as they are stored (H5Dread_chunk, H5Dwrite_chunk): never decoded or
// encoded again. Variable-length strings, whose chunks hold references into global heaps,
// move by value through libhdf5 as the library's copy moves them (replay.py,
// _recreate_raw_data), "" outside the mapped extent; their hash rows keep their digests. An unfiltered edge chunk that moves gets the fill value outside its
// extent, as the library writes it; a filtered one keeps the padding it has (the fill
// value in every chunk versioned-hdf5 master and vh5fs write). Virtual datasets whose
// mappings do not change are not created again (the library recreates them all, with
// raw_data's new shape as the mappings' source extent, which no reader uses): the work
// follows the chunks that move. Memory holds the slot list of one data group, one
// version's new mappings and one chunk at a time, plus what the sync holds (below).
//
// # One journaled sync, in two parts
//
// The whole deletion is one transaction (package txn, whose crash contract it inherits),
// written in one h5.File.FlushSync: a kill at any moment leaves the file as it
// was, or (once the journal is durable) the deletion complete after recovery (vh5fs fsck
// --repair, or the next read-write open). Its two parts:
//
//   - the body: the deleted version groups unlinked, prev_version relinked,
//     current_version moved. Alone it leaves a file in which every listed version reads
//     exactly as before (its chunks have not moved), as after `del vfile[name]` with the
//     links repaired;
//   - the publish: the compaction (chunk moves, raw_data and hash_table resized and
//     rewritten, virtual datasets replaced, data groups dropped).
//
// Chunk slots and the mappings that name them live in different objects, so no order of
// writes makes the compaction readable at every moment. The sync is therefore guarded
// (h5.File.GuardSync): from its commit point until its apply is durable the file's HDF5
// signature is replaced by a mark, and a kill in between leaves a file that h5py and
// every other program that does not know the journal refuses as not HDF5, rather than one
// whose kept versions read wrong, until the repair completes it. Before the guard it reads
// as it was; after it, as the deletion made it. The driver holds every write of the publish until
// the sync, in memory up to a budget and in an unlinked spill file past it, and the
// journal holds them twice: memory stays bounded, while disk use beside the file grows
// with the bytes of the chunks that move (about three times them, until the sync ends).
//
// # Deletions one at a time: the body now, one reclaim later
//
// A mount deletes versions one rmdir at a time, each durable when it returns. A whole
// deletion each would compact the data groups again for every version: the chunks after
// the first dropped slot move, and the kept versions' virtual datasets are created again,
// at every deletion, so a run of n costs n compactions, in time and in the file's growth.
// DeleteBody writes the body alone, in its own guarded sync (the
// unlinks rewrite the versions group's link storage in several places, whose half-applied
// state no order of writes is known to keep readable), and records the data groups the
// deleted versions held with a non-empty axis 0, and that a version left still has, in a
// sidecar beside the file
// (PendingPath: ".FILE.vh5fs-reclaim"), durably before that sync; a data group no
// version left has goes with the body, as the whole deletion drops it, so that its path
// is free for a new dataset at once. Every listed version
// reads as before; the deleted versions' chunks stay in raw_data with their hash rows,
// unused slots that versioned-hdf5 reads like any other file's (a commit may even map
// them again). Reclaim then runs the publish for the pending groups against the versions
// listed at that time, in one guarded sync, and removes the sidecar: the file Delete of
// the whole set would have made. Delete reclaims the pending groups too, and so do vh5fs
// compact (whose copy keeps slots, unused ones too) and fsck --repair, first. A crash
// between the two leaves the sidecar, and the next Reclaim or Delete completes the work; a
// sidecar whose reclaim was done already costs a reclaim that moves nothing. A pending
// data group the reclaim cannot plan never traps the file: the others are reclaimed, it
// stays pending (Plan.Blocked says why, CheckPending tells fsck), every version reads
// whole, a later Delete that does not hold it goes on, and compact copies it as it is.
//
// # Progress
//
// DeleteProgress, PlanDeleteProgress and ReclaimProgress tell a Progress of each data
// group planned, then of each chunk moved and data group written, then of the sync (which
// reports no fraction): the publish's work follows the chunks that move.
package lifecycle
