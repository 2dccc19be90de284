package daemon

import (
	"testing"
	"time"
)

// A spinning waiter spins for its window from its first poll and calls
// runtime.Gosched once per goschedEvery of spinning, never on its first
// polls (a Gosched per poll made a locked thread's spin hand its P to
// another thread and back on every poll).
func TestSpinnerGoschedOncePerPeriod(t *testing.T) {
	var s spinner
	t0 := time.Unix(1000, 0)
	window := 5 * goschedEvery
	goscheds := 0
	for d := time.Duration(0); d < window; d += goschedEvery / 100 {
		spin, g := s.next(t0.Add(d), window)
		if !spin {
			t.Fatalf("stopped spinning at %v, window %v", d, window)
		}
		if g {
			if d < goschedEvery {
				t.Fatalf("Gosched at %v, before a period of spinning", d)
			}
			goscheds++
		}
	}
	if goscheds < 4 || goscheds > 5 {
		t.Fatalf("%d Gosched calls over %v of spinning, want one per %v", goscheds, window, goschedEvery)
	}
	if spin, _ := s.next(t0.Add(window), window); spin {
		t.Fatal("still spinning at the end of the window")
	}
	// A new window after a sleep spins again; the Gosched clock carries on.
	s.reset()
	if spin, _ := s.next(t0.Add(window+time.Microsecond), window); !spin {
		t.Fatal("not spinning in a new window after reset")
	}
}
