package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/internal/sim"
)

// The progress line is rewritten at most once per interval of wall time,
// shows simulated time against the limit and the event rate, and is erased
// at the end.
func TestProgressLine(t *testing.T) {
	var buf bytes.Buffer
	wall := time.Unix(0, 0)
	p := newProgressLine(&buf, func() time.Time { return wall })
	wall = wall.Add(100 * time.Millisecond)
	p.report(sim.Progress{Now: 1e6, Limit: 10e9, Events: 1e5})
	if buf.Len() != 0 {
		t.Fatalf("reported before the interval: %q", buf.String())
	}
	wall = wall.Add(400 * time.Millisecond)
	p.report(sim.Progress{Now: 2.5e6, Limit: 10e9, Events: 2e6})
	want := "\r\033[Kndpsim: simulated 2.500 ms of 10000 ms limit, 2.0 M events, 4.00 M events/s"
	if buf.String() != want {
		t.Fatalf("got %q, want %q", buf.String(), want)
	}
	p.finish()
	if !strings.HasSuffix(buf.String(), "\r\033[K") {
		t.Fatalf("not erased: %q", buf.String())
	}
	var none *progressLine
	none.finish() // no terminal: nothing to do
}

// A run reports its progress through the Params hook: virtual time and
// events grow, and the limit is the run's.
func TestSimProgressHook(t *testing.T) {
	var c common
	c.link, c.size, c.mtu, c.queue, c.iw, c.gamma, c.delay, c.seed = "10G", "1MB", 9000, 8, 30, 1, time.Microsecond, 1
	star, size, err := c.star()
	if err != nil {
		t.Fatal(err)
	}
	var got []sim.Progress
	star.Progress = func(p sim.Progress) { got = append(got, p) }
	const every = 1000
	star.ProgressEvery = every
	r, err := sim.RunIncast(sim.IncastConfig{Star: star, Senders: 7, Size: size})
	if err != nil || !r.BytesVerified {
		t.Fatalf("%v %+v", err, r)
	}
	if len(got) < 2 || uint64(len(got)) != r.Events/every {
		t.Fatalf("%d reports for %d events", len(got), r.Events)
	}
	for i, p := range got {
		if p.Limit != 10e9 || p.Events < uint64(i+1)*every || i > 0 && p.Now < got[i-1].Now {
			t.Fatalf("report %d: %+v", i, p)
		}
	}
}
