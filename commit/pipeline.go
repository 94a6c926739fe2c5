package commit

import (
	"slices"

	"github.com/vh5fs/vh5fs/h5"
)

// PipelineEncoder returns the encoder of a raw_data filter pipeline (as h5.Dataset.Info
// lists it) for direct chunk writes (h5.Dataset.WriteChunk): each whole chunk as libhdf5
// would store it, in a slice of its own, or chunk itself when no filter changes it. nil
// when the pipeline has a filter the encoder does not run (libhdf5 filters those). Safe
// for concurrent use.
func PipelineEncoder(filters []h5.Filter, itemSize int) func(chunk []byte) ([]byte, error) {
	enc := newEncoder(filters, itemSize)
	if enc == nil {
		return nil
	}
	return func(chunk []byte) ([]byte, error) {
		out, owned, err := enc.encode(chunk)
		if err != nil || !owned {
			return out, err
		}
		b := slices.Clone(out)
		enc.release(out)
		return b, nil
	}
}
