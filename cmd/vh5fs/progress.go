package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vh5fs/vh5fs/lifecycle"
)

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// progressBar draws one self-overwriting line on a terminal, at most every 100 ms, at
// every change of phase and at the end of one.
type progressBar struct {
	w     io.Writer
	name  string // the command
	phase string
	last  time.Time
	drawn bool
}

func (p *progressBar) update(phase string, done, total int64) {
	now := time.Now()
	if phase == p.phase && done != total && now.Sub(p.last) < 100*time.Millisecond {
		return
	}
	p.phase, p.last, p.drawn = phase, now, true
	const width = 30
	filled := 0
	if total > 0 {
		filled = int(done * width / total)
	}
	bar := make([]byte, width)
	for i := range bar {
		bar[i] = '.'
		if i < filled {
			bar[i] = '#'
		}
	}
	fmt.Fprintf(p.w, "\r\033[K%s [%s] %d/%d %s", p.name, bar, done, total, phase)
}

// ticking draws "name: phase (Ns)" every second, for work that reports no fraction done,
// until stop, which erases the line.
func (p *progressBar) ticking(phase string) (stop func()) {
	done, exited := make(chan struct{}), make(chan struct{})
	start := time.Now()
	draw := func() {
		fmt.Fprintf(p.w, "\r\033[K%s: %s (%ds)", p.name, phase, int(time.Since(start).Seconds()))
	}
	p.drawn = true
	draw()
	go func() {
		defer close(exited)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				draw()
			}
		}
	}()
	return func() {
		close(done)
		<-exited
		p.clear()
	}
}

// clear erases the line, so that what follows starts on a clean one.
func (p *progressBar) clear() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

// stepBar shows a deletion's or a reclaim's steps (lifecycle.Progress): the time while
// nothing is counted yet, a bar of the data groups planned, then one of the chunks moved
// (of the groups written when none moves), then the time the journaled sync takes. A nil
// stepBar shows nothing.
type stepBar struct {
	bar   *progressBar
	stop  func() // the ticking line's, while one is drawn
	ended bool   // done erased the line
}

func newStepBar(w io.Writer, name string) *stepBar {
	return &stepBar{bar: &progressBar{w: w, name: name}}
}

// wait draws a ticking line saying what runs until the first step.
func (b *stepBar) wait(what string) { b.stop = b.bar.ticking(what) }

func (b *stepBar) step(s lifecycle.Step) {
	if b.stop != nil {
		b.stop()
		b.stop = nil
	}
	switch s.Phase {
	case lifecycle.Planning:
		b.bar.update("data groups planned", s.Done, s.Total)
	case lifecycle.Compacting:
		if s.Moves == 0 {
			b.bar.update("data groups written", s.Done, s.Total)
			break
		}
		b.bar.update("chunks moved (in "+s.Group+")", s.Moved, s.Moves)
	case lifecycle.Syncing:
		b.bar.clear()
		b.stop = b.bar.ticking("writing the journal and applying it")
	}
}

// done erases the line, once.
func (b *stepBar) done() {
	if b == nil || b.ended {
		return
	}
	b.ended = true
	if b.stop != nil {
		b.stop()
		b.stop = nil
	}
	b.bar.clear()
}
