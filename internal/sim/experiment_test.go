package sim

import (
	"reflect"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/internal/fabric"
	"github.com/ndpstack/ndpstack/ndp"
)

func paperStar(mtu int) StarConfig {
	return StarConfig{
		LinkRate:  10e9,
		LinkDelay: 1000,
		Endpoint:  ndp.Config{MTU: mtu, IW: 30},
		Fabric:    fabric.Config{DataQueue: 8},
		Seed:      1,
	}
}

// The paper's 7-to-1 incast of 1 MB responses (section 6.1, Figure 9): within 5% of the
// theoretical optimum, every byte verified.
func TestIncastSevenToOne(t *testing.T) {
	r, err := RunIncast(IncastConfig{Star: paperStar(9000), Senders: 7, Size: 1_000_000})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", r)
	if !r.BytesVerified || r.Completed != 7 {
		t.Fatalf("not every byte verified: %+v", r)
	}
	if r.Trimmed == 0 || r.Nacks == 0 || r.Retransmits == 0 {
		t.Fatalf("a first-RTT incast of 7×30 packets must trim and NACK: %+v", r)
	}
	if r.OverheadPct > 5 || r.OverheadPct < 0 {
		t.Fatalf("overhead %.2f%% over optimal, want 0..5%%", r.OverheadPct)
	}
}

// Figure 4's incast: 100 senders of 135 KB, the whole flow in the first RTT, so the
// header queue overflows and headers return to sender.
func TestIncastHundredBounces(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	r, err := RunIncast(IncastConfig{Star: paperStar(9000), Senders: 100, Size: 135_000})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", r)
	if !r.BytesVerified || r.Completed != 100 {
		t.Fatalf("not every byte verified: %+v", r)
	}
	if r.Bounced == 0 {
		t.Fatalf("no header returned to sender: %+v", r)
	}
	if r.OverheadPct > 5 || r.OverheadPct < 0 {
		t.Fatalf("overhead %.2f%% over optimal, want 0..5%%", r.OverheadPct)
	}
}

// A transfer over links that lose, duplicate, reorder and corrupt 1% of frames each
// still delivers every byte in order.
func TestTransferOverFaultyLinks(t *testing.T) {
	for _, mtu := range []int{1500, 9000} {
		cfg := paperStar(mtu)
		cfg.Endpoint.RTO = 200 * time.Microsecond
		cfg.Faults = Faults{Loss: 0.01, Duplicate: 0.01, Reorder: 0.01, Corrupt: 0.01}
		r, err := RunTransfer(TransferConfig{Star: cfg, Size: 4_000_000})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("mtu %d: %+v", mtu, r)
		if !r.BytesVerified {
			t.Fatalf("mtu %d: bytes not verified: %+v", mtu, r)
		}
		if r.Lost == 0 || r.Duplicated == 0 || r.Reordered == 0 || r.Corrupted == 0 {
			t.Fatalf("mtu %d: faults were not all injected: %+v", mtu, r)
		}
		if r.FrameErrors == 0 {
			t.Fatalf("mtu %d: corrupted frames were not rejected by the endpoints", mtu)
		}
	}
}

// Runs are deterministic for a seed: the simulator is a reproducible instrument.
func TestDeterministic(t *testing.T) {
	a, err := RunIncast(IncastConfig{Star: paperStar(9000), Senders: 4, Size: 200_000})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := RunIncast(IncastConfig{Star: paperStar(9000), Senders: 4, Size: 200_000})
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("same seed, different results:\n%+v\n%+v", a, b)
	}
}
