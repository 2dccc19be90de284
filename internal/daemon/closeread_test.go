package daemon

import (
	"net/netip"
	"sync"
	"testing"
	"time"
)

// Closing a client while its goroutines are copying received data out of the shared
// buffer area must make those Reads fail, never fault on the unmapped memory.
func TestClientCloseDuringReads(t *testing.T) {
	for round := 0; round < 20; round++ {
		h := startHarness(t, smallConfig(), ServerConfig{})
		srvApp, app := h.attach(), h.attach()
		l, err := srvApp.Listen(7)
		if err != nil {
			t.Fatal(err)
		}
		go func() { // stream 4 MiB at every connection
			for {
				s, err := l.Accept(time.Time{}, nil)
				if err != nil {
					return
				}
				go func() {
					s.Write(payload(4<<20, 3), time.Now().Add(10*time.Second), nil)
					s.Close()
				}()
			}
		}()
		var wg sync.WaitGroup
		started := make(chan struct{}, 4)
		for i := 0; i < 4; i++ {
			s, err := app.Dial(netip.MustParseAddrPort("10.0.0.2:7"), DialOptions{})
			if err != nil {
				t.Fatal(err)
			}
			s.CloseWrite()
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, 1<<10) // many small copies: the close lands mid-copy
				first := true
				for {
					n, err := s.Read(buf, time.Now().Add(10*time.Second), nil)
					if err != nil {
						return
					}
					if first && n > 0 {
						first = false
						started <- struct{}{}
					}
				}
			}()
		}
		for i := 0; i < 4; i++ { // every reader is streaming
			select {
			case <-started:
			case <-time.After(10 * time.Second):
				t.Fatal("no data arrived")
			}
		}
		time.Sleep(time.Duration(round%5) * 50 * time.Microsecond)
		app.Close()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("a Read did not return after its client closed")
		}
	}
}
