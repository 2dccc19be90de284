package ndp

import (
	"math/rand/v2"
	"testing"
)

// HasOutput false must mean PollFrame has nothing: drivers skip taking a
// transmit buffer on it. Checked at every step of a lossy two-way exchange
// with RPCs, bulk data, pulls, timers, and closes.
func TestHasOutputNeverHidesAFrame(t *testing.T) {
	a, b := mkEP(t, ipA, nil), mkEP(t, ipB, nil)
	if err := b.Listen(80); err != nil {
		t.Fatal(err)
	}
	if a.HasOutput() || b.HasOutput() {
		t.Fatal("idle endpoints report output")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, MaxFrameLen(a.cfg.MTU))
	payload := make([]byte, 20000)
	var now Time
	var handles []Handle
	checked, frames := 0, 0
	step := func(from, to *Endpoint) {
		for {
			had := from.HasOutput()
			n, _ := from.PollFrame(buf, now, rng.IntN(4) != 0)
			checked++
			if n == 0 {
				return
			}
			if !had {
				t.Fatalf("HasOutput false, then PollFrame built a %d-byte frame", n)
			}
			frames++
			if rng.IntN(10) != 0 { // 10% loss
				to.HandleFrame(buf[:n], now)
			}
		}
	}
	for i := 0; i < 3000; i++ {
		now += Time(rng.IntN(int(300 * us)))
		switch rng.IntN(6) {
		case 0:
			if h, err := a.Dial(addrOf(b, 80), DialOptions{}, now); err == nil {
				a.Write(h, payload[:rng.IntN(len(payload))+1], now)
				a.CloseWrite(h, now)
				handles = append(handles, h)
			}
		case 1:
			if len(handles) > 0 {
				h := handles[0]
				handles = handles[1:]
				a.Release(h)
			}
		}
		for {
			ev, ok := b.PollEvent()
			if !ok {
				break
			}
			if ev.Kind == EventReadable || ev.Kind == EventAccepted {
				var sink [4096]byte
				for {
					n, err := b.Read(ev.Handle, sink[:])
					if err != nil || n == 0 {
						break
					}
				}
			}
			if ev.Kind == EventPulls {
				b.PullReleased(ev.Handle, now)
			}
		}
		for {
			ev, ok := a.PollEvent()
			if !ok {
				break
			}
			if ev.Kind == EventPulls {
				a.PullReleased(ev.Handle, now)
			}
		}
		if t, ok := a.NextTimer(); ok && t <= now {
			a.HandleTimers(now)
		}
		if t, ok := b.NextTimer(); ok && t <= now {
			b.HandleTimers(now)
		}
		step(a, b)
		step(b, a)
	}
	if frames < 1000 {
		t.Fatalf("only %d frames exchanged: the test drove too little", frames)
	}
	t.Logf("%d PollFrame calls checked, %d frames", checked, frames)
}
