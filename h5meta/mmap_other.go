//go:build !unix

package h5meta

import (
	"io"
	"os"
)

// MapFile returns file (mapping is for Unix systems).
func MapFile(file *os.File, _ int64) io.ReaderAt { return file }

// mapObject reads the n bytes at addr (mapping is for Unix systems).
func (f *File) mapObject(_ *MappingList, addr, n uint64, what string) ([]byte, bool, error) {
	p, err := f.read(addr, int(n), what)
	return p, false, err
}

// release does nothing: lists are read, not mapped.
func (l *MappingList) release(int) {}
