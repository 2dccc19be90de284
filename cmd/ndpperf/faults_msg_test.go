package main

import (
	"testing"

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
