package commit

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/vh5fs/vh5fs/internal/fixture"
	"github.com/vh5fs/vh5fs/versions"
)

// TestConcurrent runs readers of every version and writers committing on their own staged
// arrays at the same time (run it with -race): no race, no deadlock, every read equals the
// model — the fixture's versions never change, each new version holds what its writer wrote.
// VH5FS_SOAK=1 makes each writer commit 2000 times instead of 8.
func TestConcurrent(t *testing.T) {
	commits := 8
	if os.Getenv("VH5FS_SOAK") != "" {
		commits = 2000
	}
	start := time.Now()
	file := fixture.Copy(t, fixture.Dir()+"/basic_1d.h5")
	f, c := openCommitter(t, file, Options{})

	want := map[string][]byte{}
	for _, v := range []string{"v1", "v2", "v3", "v4"} {
		d, err := f.Dataset(versions.VersionsGroup + "/" + v + "/x")
		require.NoError(t, err)
		b := make([]byte, d.Size())
		_, err = d.ReadAt(b, 0)
		require.NoError(t, err)
		want[v] = b
	}
	var (
		mu        sync.Mutex // guards committed
		committed = map[string][]byte{}
		wg        sync.WaitGroup
		stop      = make(chan struct{})
		errs      = make(chan error, 16)
	)
	read := func(version string, expect []byte) error {
		d, err := f.Dataset(versions.VersionsGroup + "/" + version + "/x")
		if err != nil {
			return err
		}
		got := make([]byte, d.Size())
		if _, err := d.ReadAt(got, 0); err != nil {
			return err
		}
		if !bytes.Equal(got, expect) {
			return fmt.Errorf("version %s reads %x, want %x", version, got, expect)
		}
		return nil
	}
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for v, b := range want {
					if err := read(v, b); err != nil {
						errs <- err
						return
					}
				}
				mu.Lock()
				snapshot := make(map[string][]byte, len(committed))
				for k, v := range committed {
					snapshot[k] = v
				}
				mu.Unlock()
				for v, b := range snapshot {
					if err := read(v, b); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	var writers sync.WaitGroup
	for w := 0; w < 3; w++ {
		writers.Add(1)
		go func(w int) {
			defer writers.Done()
			d, err := f.Dataset(versions.VersionsGroup + "/v4/x")
			if err != nil {
				errs <- err
				return
			}
			arr, err := NewStaged(d)
			if err != nil {
				errs <- err
				return
			}
			model := append([]byte(nil), want["v4"]...)
			base := "v4"
			for i := 0; i < commits; i++ {
				val := make([]byte, 8)
				binary.LittleEndian.PutUint64(val, uint64(1000*w+i))
				off := int64((i * 3 % 6) * 8)
				if _, err := arr.WriteAt(val, off, d.ChunkSource()); err != nil {
					errs <- err
					return
				}
				copy(model[off:], val)
				res, err := c.Commit(Change{Base: base, Dataset: "x", Array: arr})
				if err != nil {
					errs <- err
					return
				}
				base = res.Name
				mu.Lock()
				committed[res.Name] = append([]byte(nil), model...)
				mu.Unlock()
			}
		}(w)
	}
	writers.Wait()
	time.Sleep(50 * time.Millisecond)
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, committed, 3*commits)
	t.Logf("4 readers and 3 writers, %d commits, %s", 3*commits, time.Since(start).Round(time.Millisecond))
}
