package swmr

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"
)

func superblockV3(flags byte, eof uint64) []byte {
	b := make([]byte, 48)
	copy(b, "\x89HDF\r\n\x1a\n")
	b[8], b[9], b[10], b[11] = 3, 8, 8, flags
	binary.LittleEndian.PutUint64(b[12+16:], eof)
	return b
}

func TestReadSuperblock(t *testing.T) {
	for _, tc := range []struct {
		at     int
		flags  byte
		writer Writer
	}{{0, 0x05, WriterSWMR}, {0, 0x01, WriterOpen}, {512, 0, WriterClosed}} {
		file := make([]byte, tc.at+4096)
		copy(file[tc.at:], superblockV3(tc.flags, 715))
		sb, err := ReadSuperblock(bytes.NewReader(file), int64(len(file)))
		if err != nil {
			t.Fatal(err)
		}
		if sb.Offset != int64(tc.at) || sb.Version != 3 || sb.Flags != uint32(tc.flags) || sb.EOF != 715 {
			t.Errorf("%+v", sb)
		}
		if w := (State{Superblock: sb}).Writer(); w != tc.writer {
			t.Errorf("flags %#x: writer %s, want %s", tc.flags, w, tc.writer)
		}
	}
	if (State{Superblock: Superblock{Version: 0}, ForeignLock: true}).Writer() != WriterOpen {
		t.Error("a foreign write lock on a version-0 file is a writer")
	}
	if _, err := ReadSuperblock(bytes.NewReader(make([]byte, 2000)), 2000); !errors.Is(err, ErrNoSuperblock) {
		t.Errorf("no signature: %v", err)
	}
}

func TestRetrier(t *testing.T) {
	r := Retrier{Attempts: 4, FirstSleep: time.Microsecond}
	n := 0
	if err := r.Do(func() error {
		n++
		if n < 3 {
			return errors.New("torn")
		}
		return nil
	}, nil); err != nil || n != 3 {
		t.Fatalf("err %v after %d runs", err, n)
	}
	perm := errors.New("permanent")
	n = 0
	if err := r.Do(func() error { n++; return perm }, func(err error) bool { return err != perm }); err != perm || n != 1 {
		t.Fatalf("err %v after %d runs", err, n)
	}
	n = 0
	if err := r.Do(func() error { n++; return errors.New("torn") }, nil); err == nil || n != 4 {
		t.Fatalf("err %v after %d runs", err, n)
	}
	if c := r.Counts(); c != (Counts{Retries: 2 + 3, Recovered: 1, Failed: 2}) {
		t.Errorf("%+v", c)
	}
}
