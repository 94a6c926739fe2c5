package h5

// #cgo pkg-config: hdf5
// #cgo CFLAGS: -I/usr/include/liblzf
// #cgo LDFLAGS: -llzf
// #include "vh5.h"
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"
)

// mu is the HDF5 lock: libhdf5 is not safe for concurrent use.
var mu sync.Mutex

func init() {
	lock()
	defer unlock()
	if C.vh5_init() < 0 {
		panic("h5: cannot initialise libhdf5: " + stackMessage())
	}
}

// lock takes the HDF5 lock on the calling goroutine's OS thread, which then has HDF5's
// automatic error printing off (a per-thread setting: without this, errors on threads other
// than init's were printed to stderr as HDF5-DIAG stacks).
func lock() {
	runtime.LockOSThread()
	mu.Lock()
	C.vh5_quiet()
}

func unlock() {
	mu.Unlock()
	runtime.UnlockOSThread()
}

// Error is a failed HDF5 call.
type Error struct {
	Op    string // what vh5fs was doing, e.g. "read attribute"
	Path  string // HDF5 object path (or file path)
	Stack string // HDF5's error stack, outermost first
	Err   error  // an underlying Go error, if any
}

func (e *Error) Error() string {
	var fe *FormatError
	if errors.As(e.Err, &fe) {
		return fe.Error()
	}
	msg := "h5: " + e.Op
	if e.Path != "" {
		msg += " " + e.Path
	}
	switch {
	case e.Stack != "":
		msg += ": " + e.Stack
	case e.Err != nil:
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// ErrUnsupported marks data vh5fs cannot represent (e.g. a reference-typed attribute).
var ErrUnsupported = errors.New("unsupported HDF5 type")

// stackMessage returns and clears HDF5's error stack; call with the lock held.
func stackMessage() string {
	var buf [1024]C.char
	C.vh5_error_message(&buf[0], C.size_t(len(buf)))
	return C.GoString(&buf[0])
}

// fail builds an *Error from the current HDF5 error stack; call with the lock held, right
// after the failing call.
func fail(op, path string, err error) error {
	e := &Error{Op: op, Path: path, Stack: stackMessage(), Err: err}
	if fe := newerFormat(e.Stack); fe != nil && e.Err == nil {
		e.Err = fe
	}
	if e.Stack == "" && e.Err == nil {
		e.Err = fmt.Errorf("failed without an HDF5 error message")
	}
	return e
}

func hsizes(v []int64) []C.hsize_t {
	out := make([]C.hsize_t, len(v))
	for i, x := range v {
		out[i] = C.hsize_t(x)
	}
	return out
}

func int64s(v []C.hsize_t) []int64 {
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}

func ptr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

func hptr(v []C.hsize_t) *C.hsize_t {
	if len(v) == 0 {
		return nil
	}
	return &v[0]
}
