package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/ndpstack/ndpstack/internal/sim"
)

// A run of the 432-host FatTree takes minutes. When stderr is a terminal,
// ndpsim shows how far it has got there, rewriting one line: simulated time
// against the run's limit, events and events per second. Redirected to a file
// or a pipe, stderr gets nothing (logs and --json output stay clean).

// progress shows the runs' progress on a terminal; nil (no line) otherwise.
var progress *progressLine

// stderrIsTerminal reports whether stderr is a character device (a terminal).
func stderrIsTerminal() bool {
	fi, err := os.Stderr.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progressLine writes sim.Progress reports to w as one line rewritten in place,
// at most every interval of wall time, and clears it on finish.
type progressLine struct {
	w        io.Writer
	now      func() time.Time
	interval time.Duration
	last     time.Time // when the line was last written (or created)
	events   uint64    // events at that time
	shown    bool
}

func newProgressLine(w io.Writer, now func() time.Time) *progressLine {
	t := now()
	return &progressLine{w: w, now: now, interval: 250 * time.Millisecond, last: t}
}

func (p *progressLine) report(r sim.Progress) {
	t := p.now()
	if t.Sub(p.last) < p.interval {
		return
	}
	rate := float64(r.Events-p.events) / t.Sub(p.last).Seconds() // since the last line
	p.last, p.events = t, r.Events
	fmt.Fprintf(p.w, "\r\033[Kndpsim: simulated %.3f ms of %.0f ms limit, %.1f M events, %.2f M events/s",
		float64(r.Now)/1e6, float64(r.Limit)/1e6, float64(r.Events)/1e6, rate/1e6)
	p.shown = true
}

// finish erases the line if one was shown. A nil progressLine does nothing.
func (p *progressLine) finish() {
	if p != nil && p.shown {
		fmt.Fprint(p.w, "\r\033[K")
		p.shown = false
	}
}
