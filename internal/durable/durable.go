// Package durable replaces small files beside an HDF5 file (a stage's tree, the deletions'
// pending set) so that a crash at any moment leaves the old file or the new one whole, and
// makes a file or a directory's entries durable (Sync).
package durable

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// WriteFile replaces path with what fill writes: a temporary file beside it (path.tmp,
// mode perm), fsynced, renamed over path, then the directory fsynced so that the rename
// is durable too. On an error the temporary file is removed and path is as it was.
func WriteFile(path string, perm os.FileMode, fill func(w io.Writer) error) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	err = fill(w)
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return Sync(filepath.Dir(path))
}

// Sync fsyncs path: a file's bytes, or a directory's entries (a rename into it).
func Sync(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	return nil
}
