package ndp

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// slowReaderTransfer sends size bytes from host 0 to host 1, whose
// application reads at most chunk bytes every every ns (slower than the pull
// rate), and returns both ends' stats after the data is verified.
func slowReaderTransfer(t *testing.T, size, chunk int, every Time) (snd, rcv Stats) {
	t.Helper()
	n := newTestNet(t, 21, Config{}, Config{})
	n.hosts[1].autoRead = false
	srv, cli := n.hosts[1].ep, n.hosts[0].ep
	c := n.connect(t)
	data := pattern(7, size)
	var got bytes.Buffer
	buf := make([]byte, chunk)
	off, closed := 0, false
	n.appAt = every
	for i := 0; got.Len() < size; i++ {
		if off < len(data) {
			k, err := cli.Write(c, data[off:], n.now)
			if err != nil {
				t.Fatalf("write: %v", err)
			}
			off += k
		}
		if off == len(data) && !closed {
			if err := cli.CloseWrite(c, n.now); err != nil {
				t.Fatal(err)
			}
			closed = true
		}
		if n.now >= n.appAt && len(n.hosts[1].accepted) > 0 {
			k, _ := srv.Read(n.hosts[1].accepted[0], buf)
			got.Write(buf[:k])
			n.appAt = n.now + every
		}
		if !n.step() || i > 5_000_000 {
			t.Fatalf("stuck after %d of %d bytes: %v", got.Len(), size, n)
		}
	}
	if !bytes.Equal(got.Bytes(), data) {
		t.Fatal("data corrupted")
	}
	return cli.Stats(), srv.Stats()
}

// A reader slower than the sender gets everything, and the receiver pulls
// only what its buffer can take: the pulls already released and not yet
// answered count against the room (flushPulls), and a writer that waits on
// its full send buffer keeps its pull credit instead of sending LAST and
// pushing a fresh window per buffer's worth (sender.moreComing), so no DATA
// arrives to a full buffer.
func TestSlowReaderNoNackStorm(t *testing.T) {
	for _, tc := range []struct {
		name  string
		chunk int
		every Time
		nacks uint64 // no-buffer NACKs allowed
	}{
		{"half-rate", 16 << 10, 20 * us, 0}, // 0.8 GB/s against 1.45 GB/s of pulls
		{"tenth-rate", 4 << 10, 30 * us, 0}, // 0.14 GB/s
		// the whole buffer at once, then nothing for 2ms: the first window
		// is pushed before the receiver can say anything, and the pulls
		// its first packets earn may meet its last in the unread buffer
		{"stalls", 256 << 10, 2000 * us, 2}, // the whole buffer at once, then nothing for 2ms
	} {
		t.Run(tc.name, func(t *testing.T) {
			const size = 4 << 20
			snd, rcv := slowReaderTransfer(t, size, tc.chunk, tc.every)
			t.Logf("data out %d (pushed %d, pulled %d), retransmits %d, no-buffer NACKs %d, stall probes %d, RTO fires %d",
				snd.DataOut, snd.PushedOut, snd.PulledOut, snd.Retransmits, rcv.NoBufferNacks, snd.StallProbes, snd.RTOFires)
			if rcv.NoBufferNacks > tc.nacks || snd.Retransmits > tc.nacks {
				t.Errorf("no-buffer NACKs %d, retransmits %d: DATA was pulled or pushed into a full buffer", rcv.NoBufferNacks, snd.Retransmits)
			}
			if pkts := uint64(size / MaxPayload(1500)); snd.PushedOut > uint64(DefaultIW(1500))+1 || snd.DataOut > pkts+2 {
				t.Errorf("pushed %d, data out %d for %d packets", snd.PushedOut, snd.DataOut, pkts)
			}
		})
	}
}

// A writer that waits on a full send buffer keeps its pulls: a writer that
// comes back only every 300 µs (an application woken late) leaves its sender
// with nothing to send when PULLs arrive; every buffer's worth used to end in
// LAST, the receiver dropped its pulls and the next Write was pushed as a
// fresh window.
func TestBlockedWriterSendsNoLast(t *testing.T) {
	n := newTestNet(t, 23, Config{}, Config{})
	srv, cli := n.hosts[1].ep, n.hosts[0].ep
	c := n.connect(t)
	const size = 4 << 20
	data := pattern(9, size)
	n.appAt = 300 * us
	for off := 0; off < len(data); {
		if n.now >= n.appAt {
			k, err := cli.Write(c, data[off:], n.now)
			if err != nil {
				t.Fatal(err)
			}
			off += k
			n.appAt = n.now + 300*us
		}
		if !n.step() {
			t.Fatalf("idle with %d bytes unwritten", len(data)-off)
		}
	}
	n.appAt = 0
	if err := cli.CloseWrite(c, n.now); err != nil {
		t.Fatal(err)
	}
	if !n.run(5_000_000, func() bool { return len(n.hosts[1].accepted) > 0 && n.hosts[1].eof[n.hosts[1].accepted[0]] }) {
		t.Fatalf("transfer did not finish: %v", n)
	}
	if !bytes.Equal(n.hosts[1].got(n.hosts[1].accepted[0]), data) {
		t.Fatal("data corrupted")
	}
	snd, rcv := cli.Stats(), srv.Stats()
	t.Logf("data out %d (pushed %d, pulled %d), receiver's pull drops %d, no-buffer NACKs %d, stall probes %d",
		snd.DataOut, snd.PushedOut, snd.PulledOut, n.hosts[1].drops, rcv.NoBufferNacks, snd.StallProbes)
	if iw := uint64(DefaultIW(1500)); snd.PushedOut > iw || n.hosts[1].drops > 1 {
		t.Errorf("pushed %d (the first window is %d), pulls dropped %d times: LAST went out mid-transfer", snd.PushedOut, iw, n.hosts[1].drops)
	}
	if snd.StallProbes != 0 || rcv.NoBufferNacks != 0 {
		t.Errorf("stall probes %d, no-buffer NACKs %d", snd.StallProbes, rcv.NoBufferNacks)
	}
}

// Every pulled packet that reaches the receiver, whole or trimmed, earns one
// PULL, so the pulls in flight stay as many as the first window however
// often a retransmission is trimmed again. A trimmed header whose sequence
// number was already owed used to earn nothing unless no pull was queued at
// all: each re-trimmed retransmission took one pull out of the loop for good,
// until the transfer crawled at one packet per round trip (two 2 MB flows
// into one receiver through ndpswitch at 200 Mb/s: 1.3 s instead of
// 0.26-0.37 s).
func TestRetrimmedPacketKeepsItsPull(t *testing.T) {
	n := newTestNet(t, 31, Config{}, Config{})
	trims := rand.New(rand.NewPCG(31, 1))
	var pulledIn, retrimmed int
	seen := map[uint32]bool{}
	n.middle = func(from, to int, b []byte) ([]byte, bool) {
		var f Frame
		if to != 1 || ParseFrame(b, &f) != nil || f.Header.Type != TypeData || f.Header.Flags&FlagPulled == 0 {
			return b, true
		}
		pulledIn++
		if trims.Float64() < 0.3 { // a switch queue overflowing now and then
			if seen[f.Header.Seq] {
				retrimmed++
			}
			seen[f.Header.Seq] = true
			k, err := TrimFrame(b)
			if err != nil {
				t.Fatal(err)
			}
			return b[:k], true
		}
		return b, true
	}
	cli := n.hosts[0].ep
	c := n.connect(t)
	const size = 2 << 20
	data := pattern(11, size)
	n.writeAll(0, c, data, true)
	if !n.run(5_000_000, func() bool { return len(n.hosts[1].accepted) > 0 && n.hosts[1].eof[n.hosts[1].accepted[0]] }) {
		t.Fatalf("transfer did not finish: %v", n)
	}
	if !bytes.Equal(n.hosts[1].got(n.hosts[1].accepted[0]), data) {
		t.Fatal("data corrupted")
	}
	handed := 0
	for _, ev := range n.hosts[1].pullsEv {
		handed += ev.Count
	}
	snd := cli.Stats()
	// One pull per pulled arrival, and per pushed one (the first window),
	// but none for the packet that carries LAST.
	want := pulledIn + int(snd.PushedOut) - 1
	t.Logf("%d pulled packets arrived (%d retrimmed), %d pushed; %d pulls handed to the pull queue; RTO fires %d, stall probes %d",
		pulledIn, retrimmed, snd.PushedOut, handed, snd.RTOFires, snd.StallProbes)
	if retrimmed < 50 {
		t.Fatalf("only %d retransmissions trimmed again: the test does not test", retrimmed)
	}
	if handed < want {
		t.Errorf("%d pulls for %d arrivals: %d pulls lost from the loop", handed, want, want-handed)
	}
}

// Liveness seeds that livelocked on a stall probe meeting stale pulls out
// (82: a first-RTT packet's probe, which keeps FlagSYN and so answers no
// pull, three pulls out, one owed; 138 the same before re-trims earned a
// pull) finish.
func TestStallProbeClearsStalePullsOut(t *testing.T) {
	var tot livenessTotals
	for _, seed := range []uint64{34, 82, 138} {
		runLiveness(t, randomLiveness(seed), &tot)
	}
}
