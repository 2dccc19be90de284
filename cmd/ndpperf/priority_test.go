package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/internal/testbed"
)

func TestParsePriorityFlags(t *testing.T) {
	def := priorityOpts{senders: 2, size: 2e6, rate: 200e6, rounds: 5, deadline: 0.9, poll: "adaptive"}
	for _, tc := range []struct {
		args    []string
		want    priorityOpts
		wantErr string
	}{
		{args: nil, want: def},
		{args: []string{"--senders", "4", "--size", "8MB", "--rate", "1G", "--rounds", "3", "--deadline", "1.5", "--poll", "busy", "--json"},
			want: priorityOpts{senders: 4, size: 8e6, rate: 1e9, rounds: 3, deadline: 1.5, poll: "busy", json: true}},
		{args: []string{"--senders", "1"}, wantErr: "--senders"},
		{args: []string{"--senders", "9"}, wantErr: "--senders"},
		{args: []string{"--size", "1KB"}, wantErr: "--size"},
		{args: []string{"--rate", "1"}, wantErr: "bad rate"},
		{args: []string{"--rounds", "0"}, wantErr: "--rounds"},
		{args: []string{"--deadline", "0"}, wantErr: "--deadline"},
		{args: []string{"--deadline", "NaN"}, wantErr: "--deadline"},
		{args: []string{"--poll", "x"}, wantErr: "--poll"},
	} {
		got, err := parsePriorityFlags(tc.args)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: error %v, want one containing %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v, %v; want %+v", tc.args, got, err, tc.want)
		}
	}
	if d := def.d3Deadline(); d != 144*time.Millisecond {
		t.Errorf("default deadline %v, want 0.9 x 2 x 2 MB at 200 Mb/s = 144ms", d)
	}
}

// checkPriority asserts what every run of the benchmark must show: every
// flow took positive time; under strict priority flow 0 finished first;
// under D3 flow 0 met its deadline without being quenched; the
// unmeetable deadline failed fast
// with ErrDeadlineUnmeetable, within failWithinMs of the dial.
func checkPriority(t *testing.T, out priorityOutput, o priorityOpts, failWithinMs float64) {
	t.Helper()
	if len(out.Policies) != 3 {
		t.Fatalf("policies %+v", out.Policies)
	}
	for _, p := range out.Policies {
		if len(p.Flows) != o.senders || p.MedianRoundMs <= 0 || p.GoodputMbps <= 0 {
			t.Errorf("%s: %+v", p.Policy, p)
		}
		for _, f := range p.Flows {
			if len(f.Ms) != out.Rounds || f.MinMs <= 0 || f.MedianMs < f.MinMs || f.MaxMs < f.MedianMs || f.Quenched != 0 {
				t.Errorf("%s flow %d: %+v", p.Policy, f.Flow, f)
			}
		}
	}
	for _, p := range out.Policies[1:] { // priority, deadline
		if p.Policy == "deadline" {
			// D3 promises the deadline, not the first place: a flow that
			// gets ahead of its deadline needs less and shares the rest, so
			// with a lax deadline both flows may end together.
			if f := p.Flows[0]; f.MaxMs > out.DeadlineMs {
				t.Errorf("deadline: flow 0 (%s) took up to %.1f ms, past its %.1f ms deadline", f.Hint, f.MaxMs, out.DeadlineMs)
			}
			continue
		}
		for _, f := range p.Flows[1:] {
			if p.Flows[0].MedianMs >= f.MedianMs {
				t.Errorf("%s: flow 0 (%s) median %.1f ms, not before flow %d's %.1f ms", p.Policy, p.Flows[0].Hint, p.Flows[0].MedianMs, f.Flow, f.MedianMs)
			}
		}
	}
	u := out.Unmeetable
	if !u.Unmeetable || u.FailedAfter <= 0 || u.FailedAfter >= failWithinMs {
		t.Errorf("unmeetable deadline: %+v (want ErrDeadlineUnmeetable within %.1f ms)", u, failWithinMs)
	}
}

// TestPriorityTestbed: 2 flows of 512 KiB into receivers paced at
// 50 Mb/s, 3 rounds per policy. Under -race on a loaded 2-vCPU machine
// the stacks fall far below the pacer's rate (at 100 Mb/s and a 3 x
// deadline, fair rounds took up to 471 ms against 84 ms ideal, and flow 0
// missed its 252 ms deadline at 263 ms: D3 paces pulls, it cannot make a
// descheduled stack faster). So the pacer runs slowly enough to stay the
// main bottleneck and flow 0's deadline is the most lax the flag allows,
// 10 x the fair completion (1.68 s, 3 x the slowest round seen): this
// test checks that D3 does not quench or starve an on-time flow on a real
// testbed; the tight-deadline regression (quenched at deadline - size /
// rate without progress reports) is TestPrioritySim's, on exact time.
func TestPriorityTestbed(t *testing.T) {
	testbed.RequireRoot(t)
	o := priorityOpts{senders: 2, size: 512 << 10, rate: 50e6, rounds: 3, deadline: 10, poll: "adaptive"}
	out, err := priorityTestbed(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range out.Policies {
		t.Logf("%s: %+v; receiver %+v", p.Policy, p.Flows, *p.Receiver)
	}
	t.Logf("unmeetable: %+v", out.Unmeetable)
	// The sender learns of the quench one round trip plus a poller wakeup
	// after it dials: 0.3-6 ms on an idle VM, but 30 ms was seen under
	// -race with concurrent builds (past the 21 ms deadline itself). A
	// flow D3 did not quench would complete or time out (5 s) instead, so
	// the error itself is the check; the bound only says "not at the end".
	checkPriority(t, out, o, 1000)
	if out.Unmeetable.Quenched != 1 {
		t.Errorf("receiver quenched %d connections, want 1", out.Unmeetable.Quenched)
	}
}

// TestPrioritySim runs the unprivileged fallback on the simulator, where
// the pull pacer is exact: the same properties hold. The second case is
// the command's default, a deadline a fair share would miss (0.9 x): the
// simulator's hosts must report D3 progress (PullQueue.Progress), or the
// remaining size never shrinks and flow 0 is quenched at deadline -
// size / rate (64.2 ms) although it is on time.
func TestPrioritySim(t *testing.T) {
	for _, o := range []priorityOpts{
		{senders: 3, size: 1 << 20, rate: 1e9, rounds: 1, deadline: 1.5, poll: "adaptive"},
		{senders: 2, size: 2e6, rate: 200e6, rounds: 1, deadline: 0.9, poll: "adaptive"},
	} {
		out, err := prioritySimRun(o)
		if err != nil {
			t.Fatal(err)
		}
		checkPriority(t, out, o, out.Unmeetable.DeadlineMs) // exact time: before the deadline
		// Every sender dials the unmeetable deadline in the simulator's run: the
		// receiver quenched each (it reported 0 before it read its pull queue).
		if q := out.Unmeetable.Quenched; q != uint64(o.senders) {
			t.Errorf("deadline %v: receiver quenched %d flows, want %d", o.deadline, q, o.senders)
		}
		fair := out.Policies[0]
		// Fair sharing: every flow ends within a few percent of K x size at the
		// link rate (payload overhead aside).
		for _, f := range fair.Flows {
			if f.MedianMs < out.FairMs || f.MedianMs > 1.15*out.FairMs {
				t.Errorf("deadline %v: fair flow %d: %.2f ms, want about %.2f", o.deadline, f.Flow, f.MedianMs, out.FairMs)
			}
		}
		t.Logf("%+v", out)
	}
}

// A quenched flow did not complete: its rounds are counted and listed with
// when the sender got ErrDeadlineUnmeetable and what the receiver had read,
// and left out of the completion times and of the deadline-met count. They
// used to be mixed into median_ms, so a flow quenched after 89-125 ms read
// as one that finished inside its 144 ms deadline.
func TestSummarizePriorityQuenched(t *testing.T) {
	o := priorityOpts{senders: 2, size: 2e6, rate: 200e6, rounds: 3, deadline: 0.9}
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	p := summarizePriority("deadline", o, [][]flowOutcome{
		{{d: ms(100), quenched: true, got: 566752}, {d: ms(300)}},
		{{d: ms(120)}, {d: ms(250)}},
		{{d: ms(90), quenched: true, got: -1}, {d: ms(280)}},
	})
	f := p.Flows[0]
	if f.Quenched != 2 || len(f.Ms) != 1 || f.MedianMs != 120 || f.MinMs != 120 || f.MaxMs != 120 {
		t.Errorf("flow 0: %+v; want 2 quenched, 1 completed in 120 ms", f)
	}
	if !slices.Equal(f.QuenchedAtMs, []float64{100, 90}) || !slices.Equal(f.QuenchedBytes, []int64{566752, -1}) {
		t.Errorf("flow 0 quenched at %v ms with %v bytes read; want [100 90], [566752 -1]", f.QuenchedAtMs, f.QuenchedBytes)
	}
	if p.Flow0DeadlineMet != 1 || p.Flow0First != 1 {
		t.Errorf("deadline met %d, first %d rounds; want 1 and 1 (the completed round)", p.Flow0DeadlineMet, p.Flow0First)
	}
	if g := p.Flows[1]; g.Quenched != 0 || g.MedianMs != 280 || len(g.QuenchedAtMs) != 0 {
		t.Errorf("flow 1: %+v", g)
	}
	none := summarizePriority("deadline", o, [][]flowOutcome{{{d: ms(100), quenched: true, got: 0}, {d: ms(300)}}})
	if f := none.Flows[0]; f.MedianMs != 0 || len(f.Ms) != 0 || f.Quenched != 1 || none.Flow0DeadlineMet != 0 {
		t.Errorf("a flow quenched in every round: %+v, deadline met %d", f, none.Flow0DeadlineMet)
	}
}
