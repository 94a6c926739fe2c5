package fsnode

import (
	"io"
	"os"
	"strings"
	"time"
)

// fusermountWait bounds the wait for the end of fusermount3's output once the mount call
// has returned: fusermount3 has exited by then, but a process started meanwhile that
// inherited the pipe would hold it open.
const fusermountWait = time.Second

// withFusermountStderr runs mount with os.Stderr, which go-fuse hands to fusermount3 (a
// mount that is not root's) as its standard error, replaced by a pipe, so that a failed
// mount can give fusermount3's reason instead of its bare exit status: a background
// mount's daemon has no terminal to show that line on. Output of a mount that succeeds
// (a warning) goes on to the real standard error. Nothing else may start a process with
// os.Stderr, or swap it, while mount runs.
func withFusermountStderr(mount func() error) (reason string, err error) {
	r, w, perr := os.Pipe()
	if perr != nil {
		return "", mount()
	}
	defer r.Close()
	out := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(r, 64<<10))
		out <- b
	}()
	stderr := os.Stderr
	os.Stderr = w
	err = mount()
	os.Stderr = stderr
	w.Close()
	var b []byte
	select {
	case b = <-out:
	case <-time.After(fusermountWait):
	}
	if err == nil {
		stderr.Write(b)
		return "", nil
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "; "), err
}

// mountError is a mount that the kernel or fusermount3 refused. It reads as fusermount3's
// reason when there is one, else as go-fuse's error (whose "fusermount exited with code
// 256\n" ends in a newline), and wraps the latter.
type mountError struct {
	mountpoint, reason string
	err                error
}

func (e *mountError) Error() string {
	reason := e.reason
	if reason == "" {
		reason = strings.TrimSpace(e.err.Error())
	}
	return "mount " + e.mountpoint + ": " + reason
}

func (e *mountError) Unwrap() error { return e.err }
