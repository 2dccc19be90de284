package engine

import (
	"sync"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/ndp"
)

// waitLogLink is a MemLink that records when each Wait began and ended.
type waitLogLink struct {
	*MemLink
	mu         sync.Mutex
	begun, end []time.Time
}

func (l *waitLogLink) Wait(d time.Duration) error {
	l.mu.Lock()
	l.begun = append(l.begun, time.Now())
	l.mu.Unlock()
	err := l.MemLink.Wait(d)
	l.mu.Lock()
	l.end = append(l.end, time.Now())
	l.mu.Unlock()
	return err
}

// The background poller woken from its sleep on the link with nothing to
// poll (an API call's Wake, afterCallUnlock) sleeps again at once instead
// of spinning its idle window. Spinning there took the CPU of the thread
// that woke it: at the start of a persistent run's turn the client's
// stack's poller spun up to 1 ms on the client's CPU while the client,
// inside its eventfd write, and the server goroutine it had just started
// waited, and the client's RTO fired. Here a 5 ms spin window: each Wake
// is followed by the next sleep within a fraction of it.
func TestWokenPollerSleepsAgain(t *testing.T) {
	ma, _ := NewMemPipe(MemConfig{}, macA, macB)
	l := &waitLogLink{MemLink: ma}
	s, err := New(Config{
		Link:     l,
		Endpoint: ndp.Config{LocalIP: ipA, Seed: 1},
		Resolver: StaticResolver{ipA: macA, ipB: macB},
		Mode:     PollAdaptive,
		Spin:     5 * time.Millisecond,
		MaxSpin:  5 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	waits := func() int {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.begun)
	}
	deadline := time.Now().Add(5 * time.Second)
	for waits() == 0 || !s.sleeping.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the background poller never slept on the link")
		}
		time.Sleep(time.Millisecond)
	}
	const rounds = 10
	for range rounds {
		n := waits()
		s.link.Wake()
		for waits() == n {
			if time.Now().After(deadline) {
				t.Fatal("the background poller did not sleep again after a Wake")
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var gaps []time.Duration
	for i := 1; i < len(l.begun) && i <= len(l.end); i++ {
		gaps = append(gaps, l.begun[i].Sub(l.end[i-1]))
	}
	late := 0
	for _, g := range gaps {
		if g > 2500*time.Microsecond { // half the spin window
			late++
		}
	}
	// Allow one for a loaded machine; before, every one spun the 5 ms.
	if late > 1 {
		t.Fatalf("after a Wake the poller slept again only after %v (gaps between sleeps)", gaps)
	}
}
