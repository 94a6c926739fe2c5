package versions

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/staged"
)

// FuzzChunkMap feeds arbitrary mappings to chunk-map construction: it must accept or
// refuse them without panicking, and whatever it accepts must read without error.
func FuzzChunkMap(f *testing.F) {
	f.Add([]byte{0, 0, 4, 0, 4, 0, 4, 0}, uint8(10), uint8(4), uint16(64))
	f.Add([]byte{8, 0, 2, 0, 8, 0, 2, 0, 0, 0, 4, 0, 0, 0, 4, 0}, uint8(10), uint8(4), uint16(64))
	f.Fuzz(func(t *testing.T, data []byte, shape0, chunk0 uint8, extent0 uint16) {
		if chunk0 == 0 {
			return
		}
		shape := []int64{int64(shape0)}
		chunks := []int64{int64(chunk0)}
		d := &Dataset{Shape: shape, Chunks: chunks, Type: h5.Type{Size: 1, Raw: true}, RawData: "/raw", Fill: []byte{7}}
		arr, err := staged.New(shape, chunks, 1, d.Fill)
		if err != nil {
			return
		}
		var maps []h5.Mapping
		for i := 0; i+8 <= len(data) && len(maps) < 64; i += 8 {
			v := func(k int) int64 { return int64(int16(binary.LittleEndian.Uint16(data[i+k:]))) }
			maps = append(maps, h5.Mapping{VStart: []int64{v(0)}, VCount: []int64{v(2)}, SrcFile: ".", SrcDataset: "/raw", SrcStart: []int64{v(4)}, SrcCount: []int64{v(6)}})
		}
		cm := d.newChunkMapper(arr, []int64{int64(extent0)})
		for i := range maps {
			if !cm.add(&maps[i]) {
				return
			}
		}
		cm.finish()
		// Each chunk reads from the last mapping of it, and the blocks list those in grid order.
		last := map[int64]int64{}
		for _, m := range maps {
			last[m.VStart[0]/int64(chunk0)] = m.SrcStart[0]
		}
		var grids []int64
		for g := range last {
			grids = append(grids, g)
		}
		slices.Sort(grids)
		if len(d.blocks()) != len(grids) {
			t.Fatalf("mappings %v: %d blocks, want %d", maps, len(d.blocks()), len(grids))
		}
		for i, b := range d.blocks() {
			if g := grids[i]; b.grid[0] != g || b.off != last[g] {
				t.Fatalf("mappings %v: block %d is %v at %d, want [%d] at %d", maps, i, b.grid, b.off, g, last[g])
			}
		}
		buf := make([]byte, d.Shape[0])
		if _, err := arr.ReadAt(buf, 0, zeroSource{int(chunk0)}); err != nil {
			t.Fatalf("accepted mappings %v do not read: %v", maps, err)
		}
	})
}

type zeroSource struct{ n int }

func (z zeroSource) Chunk(off int64) ([]byte, error) { return make([]byte, z.n), nil }
