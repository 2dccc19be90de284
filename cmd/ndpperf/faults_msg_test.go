package main

import (
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/internal/testbed"
)

// The oversized and timed-out message rows over real frames (veth, AF_XDP):
// the NDP server resets the message, its client gets the error it should
// (ErrMessageTooLarge; a reset within the read timeout's bound), and the
// server answers the Calls that follow. (The stalled-sender and 1,000
// stalled connections rows are longer; sockapi's tests hold the same
// properties over an in-memory pipe and switch.)
func TestFaultRowsMessages(t *testing.T) {
	testbed.RequireRoot(t)
	tb := testbed.NewT(t)
	pair, err := tb.NewPair(testbed.VethConfig{AddrA: "10.207.0.1/24", AddrB: "10.207.0.2/24"})
	if err != nil {
		t.Fatal(err)
	}
	env := &faultEnv{pair: pair}
	for _, tc := range []struct {
		name string
		run  func(*faultEnv, string) faultRow
	}{
		{"oversized message", (*faultEnv).oversizedMessage},
		{"timed-out message", (*faultEnv).timedOutMessage},
	} {
		r := tc.run(env, "ndp")
		if !r.Pass || r.Lost != 0 {
			t.Errorf("%s: %+v", tc.name, r)
		}
	}
}

// Link outages over real frames (veth, AF_XDP, NDP embedded stacks): the
// client's veth goes down for 0.3 s and for 3 s during a 16 MiB transfer and
// comes back: the transfer completes, SHA-256 verified, and both ends see the
// close without error (the time to resume is logged). Then the link goes
// down for good with a 1 s user timeout: both ends get their error within
// userTimeoutBound, no read or write blocks past it.
func TestFaultRowsOutages(t *testing.T) {
	testbed.RequireRoot(t)
	tb := testbed.NewT(t)
	pair, err := tb.NewPair(testbed.VethConfig{AddrA: "10.208.0.1/24", AddrB: "10.208.0.2/24"})
	if err != nil {
		t.Fatal(err)
	}
	o := faultOpts{size: 16 << 20, userTimeout: time.Second}
	payload, sum := throughputPayload(o.size)
	env := &faultEnv{o: o, pair: pair, payload: payload, sum: sum}
	for _, d := range []time.Duration{300 * time.Millisecond, 3 * time.Second} {
		r := env.outageTransfer("ndp", d)
		t.Logf("outage %v: %s, resumed %.3fs after link up (%.3fs after down), total %.3fs", d, r.Outcome, r.ResumeAfterUpS, r.ResumeAfterDownS, r.TotalS)
		if !r.Pass || !r.Verified || r.Lost != 0 {
			t.Errorf("outage %v: %+v", d, r)
		}
	}
	r := env.pastUserTimeout("ndp")
	t.Logf("past the user timeout: %s; client %q after %.3fs, server %q after %.3fs (bound %.3fs)", r.Outcome, r.ClientErr, r.ClientErrAfterS, r.ServerErr, r.ServerErrAfterS, r.BoundS)
	if !r.Pass {
		t.Errorf("past the user timeout: %+v", r)
	}
}
