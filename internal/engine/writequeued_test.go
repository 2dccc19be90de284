package engine

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/ndpstack/ndpstack/ndp"
)

// WriteQueued sends nothing until the stack polls; the poll then sends the
// buffers written before it as full packets (ndpd writes one application
// frame at a time; per-frame transmits made two packets, a full one and a
// short one, and a kick per frame).
func TestWriteQueuedSendsFullPacketsOnPoll(t *testing.T) {
	snd, rcv, _, _ := memPair(t, PollAdaptive, noBackground)
	l, err := rcv.Listen(7, 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := snd.Dial(context.Background(), ipB, 7, ndp.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte{0}, false, nil); err != nil {
		t.Fatal(err)
	}
	sc, err := l.Accept(nil)
	if err != nil {
		t.Fatal(err)
	}
	one := make([]byte, 1)
	if _, err := sc.Read(one, nil); err != nil {
		t.Fatal(err)
	}

	const frame, frames = 2048, 8
	want := make([]byte, frame*frames)
	for i := range want {
		want[i] = byte(i * 7)
	}
	before := snd.Stats().TxFrames
	for i := 0; i < frames; i++ {
		n, err := c.WriteQueued(want[i*frame:(i+1)*frame], i == frames-1)
		if err != nil || n != frame {
			t.Fatalf("WriteQueued %d: %d, %v", i, n, err)
		}
	}
	if got := snd.Stats().TxFrames; got != before {
		t.Fatalf("WriteQueued transmitted %d frames before a poll", got-before)
	}
	var got []byte
	buf := make([]byte, 64<<10)
	for spins := 0; len(got) < len(want) && spins < 100000; spins++ {
		snd.Poll()
		rcv.Poll()
		for sc.Readable() > 0 {
			n, err := sc.Read(buf, nil)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, buf[:n]...)
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, want the %d written", len(got), len(want))
	}
	mss := snd.ep.MSS()
	full := (len(want) + mss - 1) / mss
	if sent := snd.Stats().TxFrames - before; sent > uint64(full)+2 {
		// +2: a retransmission or the FIN alone may add a frame.
		t.Fatalf("%d data frames for %d bytes in %d-byte writes, want about %d (MSS %d): not coalesced", sent, len(want), frame, full, mss)
	}
}

// PollLoop with deferTx holds the ACK that a received data frame produces until the
// next Poll; Poll then sends it.
func TestPollLoopDeferTxHoldsACKsForNextPoll(t *testing.T) {
	snd, rcv, _, _ := memPair(t, PollAdaptive, noBackground)
	if _, err := rcv.Listen(7, 0); err != nil {
		t.Fatal(err)
	}
	c, err := snd.Dial(context.Background(), ipB, 7, ndp.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WriteQueued([]byte("request"), true); err != nil {
		t.Fatal(err)
	}
	snd.Poll()
	before := rcv.Stats()
	if !rcv.PollLoop(true, false) {
		t.Fatal("PollLoop(deferTx) found nothing to receive")
	}
	after := rcv.Stats()
	if after.RxFrames == before.RxFrames {
		t.Fatal("PollLoop(deferTx) received no frame")
	}
	if after.TxFrames != before.TxFrames {
		t.Fatalf("PollLoop(deferTx) sent %d frames; the ACK should wait for the next poll", after.TxFrames-before.TxFrames)
	}
	rcv.Poll()
	if rcv.Stats().TxFrames == after.TxFrames {
		t.Fatal("the next Poll sent nothing: the deferred ACK was lost")
	}
}

// ReadBuffered reads what a poll received and nothing more: it neither
// waits nor polls, so an ACK that PollLoop(deferTx) held stays held until the
// caller's next poll (Read polls when it finds nothing, which sent it).
func TestReadBufferedDoesNotPoll(t *testing.T) {
	snd, rcv, _, _ := memPair(t, PollAdaptive, noBackground)
	l, err := rcv.Listen(7, 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := snd.Dial(context.Background(), ipB, 7, ndp.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WriteQueued([]byte("request"), true); err != nil {
		t.Fatal(err)
	}
	snd.Poll()
	if !rcv.PollLoop(true, false) {
		t.Fatal("PollLoop(deferTx) found nothing to receive")
	}
	sc, err := l.Accept(nil)
	if err != nil {
		t.Fatal(err)
	}
	before := rcv.Stats()
	buf := make([]byte, 64)
	n, err := sc.ReadBuffered(buf)
	if err != nil || string(buf[:n]) != "request" {
		t.Fatalf("ReadBuffered: %q, %v; want \"request\"", buf[:n], err)
	}
	if n, err := sc.ReadBuffered(buf); n != 0 || err != io.EOF {
		t.Fatalf("ReadBuffered after the last byte: %d, %v; want 0, io.EOF (the FIN came with the data)", n, err)
	}
	after := rcv.Stats()
	if after.Polls != before.Polls || after.TxFrames != before.TxFrames {
		t.Fatalf("ReadBuffered polled (%d polls) or sent (%d frames): the deferred ACK must wait for the next poll",
			after.Polls-before.Polls, after.TxFrames-before.TxFrames)
	}
	rcv.Poll()
	if rcv.Stats().TxFrames == after.TxFrames {
		t.Fatal("the next Poll sent nothing: the deferred ACK was lost")
	}

	// Nothing buffered and the stream goes on: (0, nil) at once, no poll.
	c2, err := snd.Dial(context.Background(), ipB, 7, ndp.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c2.WriteQueued([]byte("x"), false); err != nil {
		t.Fatal(err)
	}
	snd.Poll()
	rcv.Poll()
	sc2, err := l.Accept(nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := sc2.ReadBuffered(buf); n != 1 || err != nil {
		t.Fatalf("ReadBuffered: %d, %v; want the 1 byte sent", n, err)
	}
	before = rcv.Stats()
	if n, err := sc2.ReadBuffered(buf); n != 0 || err != nil {
		t.Fatalf("ReadBuffered with nothing buffered: %d, %v; want 0, nil", n, err)
	}
	if p := rcv.Stats().Polls - before.Polls; p != 0 {
		t.Fatalf("ReadBuffered with nothing buffered polled %d times", p)
	}
}

// noBackground is a memPair tweak: the test drives every Poll.
func noBackground(c *Config) { c.NoBackground = true }
