// Package commit writes new versions into a versioned-hdf5 file as versioned-hdf5's
// commit writes them (format specification sections 4-7): staged changes are hashed,
// deduplicated against the dataset's hash_table, appended to raw_data, and published as
// one version group whose virtual datasets map the new chunk map (its attributes written by
// versions' codec, CreateVersion and PublishVersion); one transaction (package txn) then
// makes it durable through the redo journal.
//
// The files, in the order a commit goes through them:
//
//   - commit.go: the Committer, a read-write file's write side (Open): the staged chunks'
//     store, the arrays handles and stages write (NewArray), one commit at a time; a
//     handle's commit (Commit) is a tree of one change.
//   - tree.go: the one commit pipeline (CommitTree): a stage's whole tree, or changes
//     over the base's tree; the version group it builds.
//   - plan.go: the decisions, before anything is written: which slot each chunk maps
//     (a full chunk of the fill value: none; a digest the table holds: its slot; one an
//     earlier chunk of this commit took: that one; else the next new slot, in
//     versioned-hdf5's order, appendOrder), and the new mapping list.
//   - index.go: a data group's hash_table as a digest index, loaded once per mount
//     (the digest and the table's rows are package hashtable's).
//   - encode.go: shuffle in Go and deflate in libdeflate, for direct chunk writes (libhdf5
//     filters other pipelines).
//   - write.go: the writes: raw_data chunks, hash_table rows and largest_index, the
//     version's virtual datasets and attributes.
//   - sink.go: chunks written into their raw_data slots while a handle's writes go on,
//     before its commit.
package commit
