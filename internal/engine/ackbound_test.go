package engine

import (
	"io"
	"testing"
	"time"
)

// deafLink is a MemLink whose Wait does not return when frames arrive,
// only on Wake or its timeout: a link sleeper whose wakeup readiness was
// taken by another goroutine's poll (it started its Wait after that poll
// consumed the frames), which is woken only by what the stack does.
type deafLink struct{ *MemLink }

func (l deafLink) Wait(timeout time.Duration) error {
	select {
	case <-l.wake:
	case <-time.After(timeout):
	}
	return nil
}

// A held ACK leaves within AckHold whatever the application does next
// (poller.go, "What bounds an ACK's wait"): here the client's application
// reads a one-packet message itself (its own poll receives it, so the ACK
// is held for an answer) while the background poller sleeps on the link
// with a 100 ms timeout, and then makes no further call. The poll that
// held the ACK armed an earlier timer than the sleeper's and wakes it, so
// the ACK leaves after AckHold and the sender's RTO (10 ms here) does not
// fire; a sleeper left to its timeout released it after ~100 ms, ten RTOs.
// PollBusy also defers the batch's transmit to the reader's next call,
// which never comes: bounded the same way.
func TestHeldAckLeavesWithoutNextCall(t *testing.T) {
	for _, mode := range []PollMode{PollAdaptive, PollBusy} {
		t.Run(mode.String(), func(t *testing.T) {
			a, b, _, _ := memPair(t, PollAdaptive, func(c *Config) {
				c.Endpoint.RTO, c.Spin = 10*time.Millisecond, time.Nanosecond
				if c.Endpoint.LocalIP == ipA {
					c.Link, c.Mode = deafLink{c.Link.(*MemLink)}, mode
				}
			})
			msg := make([]byte, 1000) // one packet
			c, sc := openConn(t, a, b, len(msg))
			buf := make([]byte, len(msg))
			if _, err := io.ReadFull(readerFunc(func(p []byte) (int, error) { return sc.Read(p, nil) }), buf); err != nil {
				t.Fatal(err)
			}
			// Wait until a's background poller sleeps on the link with
			// its long timeout (nothing else is due on a).
			deadline := time.Now().Add(5 * time.Second)
			for !(a.sleeping.Load() && a.linkWaiter.Load() && a.spinners.Load() == 0) {
				if time.Now().After(deadline) {
					t.Fatal("a's background poller never slept on the link")
				}
				time.Sleep(100 * time.Microsecond)
			}
			before := b.Stats().Endpoint
			if _, err := sc.Write(msg, false, nil); err != nil {
				t.Fatal(err)
			}
			// The reader's own poll takes the message (the sleeper is
			// deaf to it) and holds its ACK for an answer that does not
			// come.
			if _, err := io.ReadFull(readerFunc(func(p []byte) (int, error) { return c.Read(p, nil) }), buf); err != nil {
				t.Fatal(err)
			}
			deadline = time.Now().Add(5 * time.Second)
			for b.Stats().Endpoint.RTTSamples == before.RTTSamples {
				if time.Now().After(deadline) {
					t.Fatal("the held ACK never left")
				}
				time.Sleep(100 * time.Microsecond)
			}
			after := b.Stats().Endpoint
			if fires := after.RTOFires - before.RTOFires; fires != 0 {
				t.Fatalf("the sender's RTO fired %d times before the held ACK arrived", fires)
			}
		})
	}
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }
