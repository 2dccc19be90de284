package sockapi

import (
	"testing"
	"time"
)

// A stack opened with NoBackgroundPoller moves only while a call waits on
// it: the ACK its Close of an RPC's connection leaves (PollBusy defers it to
// the next call's transmit) stays queued until the next call, and the
// server, whose response it answers, fires its RTO. Stack.Poll sends it.
func TestPollSendsWhatCloseLeft(t *testing.T) {
	for _, poll := range []bool{false, true} {
		cli, srv, err := OpenPipe(Config{PollMode: PollBusy, NoBackgroundPoller: true}, addrA, addrB)
		if err != nil {
			t.Fatal(err)
		}
		l, err := srv.Listen(7)
		if err != nil {
			t.Fatal(err)
		}
		pipeRPC(t, cli, l, Addr{IP: addrB, Port: 7}, make([]byte, 1024), make([]byte, 1024), make([]byte, 1024))
		// The client's CloseAndReuse left the ACK of the response for its next call.
		if poll {
			cli.Poll()
			srv.Poll() // takes the ACK
		}
		// Past the server's RTO for its response (4 ms: the initial RTO of
		// a connection with no RTT sample), then let its timers run.
		time.Sleep(20 * time.Millisecond)
		srv.Poll()
		st, err := srv.Stats()
		if err != nil {
			t.Fatal(err)
		}
		switch fires := st.Endpoint.RTOFires; {
		case poll && fires != 0:
			t.Errorf("with the client's Poll: %d RTO fires at the server, want 0", fires)
		case !poll && fires == 0:
			t.Errorf("without the client's Poll the server's RTO did not fire: the test no longer shows what Poll is for")
		}
		l.Close()
		cli.Close()
		srv.Close()
	}
}
