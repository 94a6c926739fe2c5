package chunkplan

// Next steps idx to the next index of a box of the given extent in C order (the last axis
// fastest), as an odometer; false once it has passed the last index, with idx back at all
// zeros. The loops that walk chunks, or rows within a chunk, share it.
func Next(idx, extent []int64) bool {
	for a := len(idx) - 1; a >= 0; a-- {
		if idx[a]++; idx[a] < extent[a] {
			return true
		}
		idx[a] = 0
	}
	return false
}
