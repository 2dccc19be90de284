package pullpacer

import (
	"testing"

	"github.com/ndpstack/ndpstack/ndp"
)

func TestRefundMovesNextReleaseEarlier(t *testing.T) {
	// 9038-byte pulls at 10 Gb/s: one per 7230.4 ns.
	q, err := NewPullQueue(QueueConfig{LinkRate: 10e9, PullBytes: 9038})
	if err != nil {
		t.Fatal(err)
	}
	q.Add(1, 10)
	if _, ok := q.Next(0); !ok {
		t.Fatal("first pull not released at once")
	}
	at, _ := q.NextAt()
	if at != 7230 {
		t.Fatalf("next at %d, want 7230", at)
	}
	// A pulled packet came back 7,738 bytes short: 6190.4 ns of the slot unused.
	q.Refund(1000, 7738)
	if at2, _ := q.NextAt(); at2 != 1040 {
		t.Fatalf("after refund next at %d, want 1040", at2)
	}
	// A refund never pulls the clock before now (MaxBurst 2: at most two back to back).
	q.Refund(2000, 1_000_000)
	if at3, _ := q.NextAt(); at3 != 2000 {
		t.Fatalf("after an oversized refund next at %d, want now (2000)", at3)
	}
	released := 0
	for {
		if _, ok := q.Next(2000); !ok {
			break
		}
		released++
	}
	if released > 2 {
		t.Fatalf("%d pulls back to back after a refund, want <= MaxBurst 2", released)
	}
	if got := q.Stats().RefundedBytes; got != 1_007_738 {
		t.Fatalf("RefundedBytes %d", got)
	}
	// An empty queue ignores refunds.
	e, _ := NewPullQueue(QueueConfig{LinkRate: 10e9, PullBytes: 9038})
	e.Refund(0, 5000)
	if e.Stats().RefundedBytes != 0 {
		t.Fatal("empty queue took a refund")
	}
}

func TestRefundKeepsLinkBusyWithShortPackets(t *testing.T) {
	// Pulls elicit 1,538-byte packets while the queue spaces them for 9,038 bytes: with
	// refunds the release rate matches the link for the real packet size.
	q, _ := NewPullQueue(QueueConfig{LinkRate: 10e9, PullBytes: 9038})
	q.Add(1, 1000)
	now := ndp.Time(0)
	released := 0
	for now < 1_000_000 {
		if _, ok := q.Next(now); ok {
			released++
			q.Refund(now, 9038-1538)
			continue
		}
		at, _ := q.NextAt()
		now = max(at, now+1)
	}
	// 1 ms of 1,538-byte packets at 10 Gb/s is 812 packets; without refunds 138.
	if released < 780 || released > 830 {
		t.Fatalf("released %d pulls in 1 ms, want about 812", released)
	}
}

func TestChargeMovesNextReleaseLater(t *testing.T) {
	// 1538-byte pulls at 100 Mb/s, gamma 0.95: one per 129,515.8 ns.
	q, err := NewPullQueue(QueueConfig{LinkRate: 100e6, PullBytes: 1538, Gamma: 0.95})
	if err != nil {
		t.Fatal(err)
	}
	// An idle queue ignores charges: nothing pulled shares the link.
	q.Charge(0, 1538, 0)
	if q.Stats().ChargedBytes != 0 {
		t.Fatal("empty queue took a charge")
	}
	q.Add(1, 10)
	if _, ok := q.Next(0); !ok {
		t.Fatal("first pull not released at once")
	}
	at, _ := q.NextAt()
	if at != 129515 {
		t.Fatalf("next at %d, want 129515", at)
	}
	// A 1,130-byte RPC response of another connection (2) arrived unpulled:
	// 95,157.9 ns of link at gamma x rate.
	q.Charge(1000, 1130, 2)
	if at2, _ := q.NextAt(); at2 != 129515+95158 {
		t.Fatalf("after charge next at %d, want %d", at2, 129515+95158)
	}
	// A charge never holds the clock past now + MaxBurst (2) intervals.
	q.Charge(2000, 1_000_000, 0)
	if at3, _ := q.NextAt(); at3 != 2000+2*129515 {
		t.Fatalf("after an oversized charge next at %d, want %d", at3, 2000+2*129515)
	}
	if got := q.Stats().ChargedBytes; got != 1_001_130 {
		t.Fatalf("ChargedBytes %d", got)
	}
}

func TestChargeKeepsPulledPlusPushedAtGammaRate(t *testing.T) {
	// One unpulled 1,130-byte packet arrives for every ten pulls: with charges the
	// pulled packets leave room for it, so pulled + pushed wire bytes stay at
	// gamma x link (95 Mb/s of 100) instead of 95 + 8.
	q, _ := NewPullQueue(QueueConfig{LinkRate: 100e6, PullBytes: 1538, Gamma: 0.95})
	q.Add(1, 1_000_000)
	now := ndp.Time(0)
	released, pushed := 0, 0
	for now < 1e9 {
		if _, ok := q.Next(now); ok {
			released++
			if released%10 == 0 {
				pushed++
				q.Charge(now, 1130, 2) // another connection's push
			}
			continue
		}
		at, _ := q.NextAt()
		now = max(at, now+1)
	}
	mbps := float64(released*1538+pushed*1130) * 8 / 1e6
	if mbps < 94 || mbps > 96 {
		t.Fatalf("pulled + pushed %.1f Mb/s over 1 s, want 95 (gamma x link)", mbps)
	}
}

// TestChargeSkipsTheConnectionsOwnPushes: packets of a connection's first-RTT
// window are not charged while every queued pull is its own: its
// pulled packets come from the same sender after them. A queued pull of
// another connection makes the same push collide with that one's pulled
// packets, and it is charged; so is a batch from several connections (0).
func TestChargeSkipsTheConnectionsOwnPushes(t *testing.T) {
	q, _ := NewPullQueue(QueueConfig{LinkRate: 100e6, PullBytes: 1538, MaxBurst: 16})
	q.Add(1, 6)
	q.Next(0)
	at, _ := q.NextAt()
	for i := range 10 { // the rest of connection 1's first-RTT window arriving
		q.Charge(ndp.Time(i*1000), 1538, 1)
	}
	if at2, _ := q.NextAt(); at2 != at || q.Stats().ChargedBytes != 0 {
		t.Fatalf("own pushes moved the next release %d -> %d (charged %d bytes)", at, at2, q.Stats().ChargedBytes)
	}
	q.Charge(1000, 1538, 0)
	if at2, _ := q.NextAt(); at2 <= at {
		t.Fatalf("a mixed batch was not charged: next release %d", at2)
	}
	at, _ = q.NextAt()
	q.Add(2, 1)
	q.Charge(2000, 1538, 1)
	if at2, _ := q.NextAt(); at2 <= at {
		t.Fatalf("connection 1's push with connection 2's pull queued was not charged: next release %d", at2)
	}
}
