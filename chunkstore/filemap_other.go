//go:build !unix

package chunkstore

import "os"

// mapFile: mapping is for Unix systems; reads take the pread route.
func mapFile(*os.File) *fileMap { return nil }

// release: nothing is mapped.
func (m *fileMap) release([]span) {}
