package versions

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/vh5fs/vh5fs/chunkmap"
	"github.com/vh5fs/vh5fs/h5"
	"github.com/vh5fs/vh5fs/h5meta"
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
		arr, err := chunkmap.New(shape, chunks, 1, d.Fill)
		if err != nil {
			return
		}
		var maps []h5.Mapping
		for i := 0; i+8 <= len(data) && len(maps) < 64; i += 8 {
			v := func(k int) int64 { return int64(int16(binary.LittleEndian.Uint16(data[i+k:]))) }
			maps = append(maps, h5.Mapping{VStart: []int64{v(0)}, VCount: []int64{v(2)}, SrcFile: ".", SrcDataset: "/raw", SrcStart: []int64{v(4)}, SrcCount: []int64{v(6)}})
		}
		cm := d.newChunkMapper(arr, []int64{int64(extent0)})
		accepted := true
		for i := range maps {
			if accepted = cm.add(&maps[i]); !accepted {
				break
			}
		}
		// The same mappings as one batch of the fast decoder (addBatch) are taken or refused
		// alike, into the same chunk map.
		batch := h5meta.Batch{SrcFile: ".", SrcDataset: "/raw", SrcRank: 1, VRank: 1}
		for _, m := range maps {
			batch.Coords = append(batch.Coords, m.SrcStart[0], m.SrcCount[0], m.VStart[0], m.VCount[0])
		}
		d2 := &Dataset{Shape: shape, Chunks: chunks, Type: d.Type, RawData: "/raw", Fill: d.Fill}
		arr2, err := chunkmap.New(shape, chunks, 1, d.Fill)
		if err != nil {
			t.Fatal(err)
		}
		if got := d2.newChunkMapper(arr2, []int64{int64(extent0)}).addBatch(&batch); got != accepted {
			t.Fatalf("mappings %v: one by one accepted %v, as a batch %v", maps, accepted, got)
		}
		if !accepted {
			return
		}
		for g := range arr.NumChunks() {
			s1, o1 := arr.Slab([]int64{g})
			if s2, o2 := arr2.Slab([]int64{g}); s1 != s2 || o1 != o2 {
				t.Fatalf("mappings %v: chunk %d is (%d, %d) one by one, (%d, %d) as a batch", maps, g, s1, o1, s2, o2)
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
			if g := grids[i]; b.Grid[0] != g || b.Row != last[g] {
				t.Fatalf("mappings %v: block %d is %v at %d, want [%d] at %d", maps, i, b.Grid, b.Row, g, last[g])
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
