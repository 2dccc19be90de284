package sockapi

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// Stats count what an RPC exchange did: one connection opened at each
// end, the request and response bytes, and no refused frames.
func TestStatsCountAnExchange(t *testing.T) {
	a, b := pipe(t)
	l, err := b.Listen(7)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	echoServer(l, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := bytes.Repeat([]byte{7}, 5000)
	const calls = 3
	for i := 0; i < calls; i++ {
		if _, err := a.Call(ctx, addrB.String()+":7", req); err != nil {
			t.Fatal(err)
		}
	}
	sa, err := a.Stats()
	if err != nil {
		t.Fatal(err)
	}
	sb, err := b.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if sa.Endpoint.ConnsOpened != calls || sb.Endpoint.ConnsOpened != calls {
		t.Errorf("connections opened: client %d, server %d, want %d", sa.Endpoint.ConnsOpened, sb.Endpoint.ConnsOpened, calls)
	}
	if want := uint64(calls * len(req)); sa.Endpoint.BytesOut < want || sb.Endpoint.BytesIn < want || sa.Endpoint.BytesIn < want {
		t.Errorf("bytes: client out %d in %d, server in %d, want at least %d each", sa.Endpoint.BytesOut, sa.Endpoint.BytesIn, sb.Endpoint.BytesIn, want)
	}
	// A frame is refused only when it comes after its connection closed,
	// which takes a resend: a spurious RTO or a probe on a loaded machine.
	resent := sa.Endpoint.Retransmits + sb.Endpoint.Retransmits + sa.Endpoint.StallProbes + sb.Endpoint.StallProbes + sa.Endpoint.SilenceProbes + sb.Endpoint.SilenceProbes
	if (sa.RxRejected != 0 || sb.RxRejected != 0) && resent == 0 {
		t.Errorf("frames refused with nothing resent: client %d, server %d", sa.RxRejected, sb.RxRejected)
	}
	if sa.Polls == 0 || sa.Link != (LinkStats{}) {
		t.Errorf("client polls %d, link counters %+v (an in-memory pipe keeps none)", sa.Polls, sa.Link)
	}
}
