package swmr

import (
	"sync/atomic"
	"time"
)

// Retry policy of live mounts: an operation that fails in a way a concurrent write can
// cause runs again from the start, up to Attempts times in all, sleeping FirstSleep,
// 2·FirstSleep, ... (at most MaxSleep) in between. With the defaults the last attempt
// starts at most ~0.4 s after the first. This is on top of libhdf5's own per-structure
// retries of checksummed metadata (H5Pset_metadata_read_attempts).
const (
	DefaultAttempts   = 10
	DefaultFirstSleep = time.Millisecond
	DefaultMaxSleep   = 100 * time.Millisecond
)

// Retrier runs operations with bounded retries and counts them. The zero value uses the
// defaults.
type Retrier struct {
	Attempts   int
	FirstSleep time.Duration
	MaxSleep   time.Duration

	retries   atomic.Uint64 // attempts after a failed one
	failures  atomic.Uint64 // operations that failed on every attempt
	recovered atomic.Uint64 // operations that failed at least once and then succeeded
}

// Do runs fn until it succeeds, returns an error retryable rejects, or has run Attempts
// times; it returns fn's last error. fn must not leave partial results behind when it
// fails: callers only use what a successful run produced.
func (r *Retrier) Do(fn func() error, retryable func(error) bool) error {
	attempts, sleep, maxSleep := r.Attempts, r.FirstSleep, r.MaxSleep
	if attempts <= 0 {
		attempts = DefaultAttempts
	}
	if sleep <= 0 {
		sleep = DefaultFirstSleep
	}
	if maxSleep <= 0 {
		maxSleep = DefaultMaxSleep
	}
	var err error
	for i := 0; i < attempts; i++ {
		if i > 0 {
			r.retries.Add(1)
			time.Sleep(sleep)
			sleep = min(2*sleep, maxSleep)
		}
		if err = fn(); err == nil {
			if i > 0 {
				r.recovered.Add(1)
			}
			return nil
		}
		if retryable != nil && !retryable(err) {
			break
		}
	}
	r.failures.Add(1)
	return err
}

// Counts are a Retrier's totals.
type Counts struct {
	Retries   uint64 `json:"retries"`   // extra attempts made
	Recovered uint64 `json:"recovered"` // operations that succeeded after failing
	Failed    uint64 `json:"failed"`    // operations that failed every attempt (or not retryably)
}

// Counts returns the totals so far.
func (r *Retrier) Counts() Counts {
	return Counts{Retries: r.retries.Load(), Recovered: r.recovered.Load(), Failed: r.failures.Load()}
}
