package ndp

import (
	"bytes"
	"os"
	"strconv"
	"testing"
	"time"
)

// TestFaultSweep runs bidirectional transfers under random faults over
// many seeds. NDP_SWEEP=n raises the number of seeds (default 8).
func TestFaultSweep(t *testing.T) {
	seeds, lossMax := 8, 0.03
	if s, err := strconv.ParseFloat(os.Getenv("NDP_SWEEP_LOSS"), 64); err == nil {
		lossMax = s
	}
	if s, err := strconv.Atoi(os.Getenv("NDP_SWEEP")); err == nil {
		seeds = s
	}
	for seed := uint64(100); seed < 100+uint64(seeds); seed++ {
		mtu := 1500
		if seed%3 == 0 {
			mtu = 9000
		}
		n := newTestNet(t, seed, Config{MTU: mtu, RecvBuffer: 64 << 10}, Config{MTU: mtu, SendBuffer: 32 << 10})
		r := n.rnd
		n.loss, n.dup, n.trim, n.bounce = r.Float64()*lossMax, r.Float64()*0.03, r.Float64()*0.3, r.Float64()*0.5
		n.jitter = Time(r.IntN(50)) * us
		if seed%2 == 0 {
			n.rate, n.queueBytes = 1.25, 8*(mtu+14)
		}
		n.hosts[1].ep.Listen(80)
		c, _ := n.hosts[0].ep.Dial(n.addr(1, 80), DialOptions{}, 0)
		up, down := pattern(int(seed), 200<<10+r.IntN(100000)), pattern(int(seed)+1, 150<<10+r.IntN(100000))
		offUp, offDown := 0, 0
		var s Handle
		ok := n.run(20_000_000, func() bool {
			e0, e1 := n.hosts[0].ep, n.hosts[1].ep
			if offUp < len(up) {
				k, _ := e0.Write(c, up[offUp:], n.now)
				if offUp += k; offUp == len(up) {
					e0.CloseWrite(c, n.now)
				}
			}
			if s == 0 && len(n.hosts[1].accepted) > 0 {
				s = n.hosts[1].accepted[0]
			}
			if s != 0 && offDown < len(down) {
				k, _ := e1.Write(s, down[offDown:], n.now)
				if offDown += k; offDown == len(down) {
					e1.CloseWrite(s, n.now)
				}
			}
			_, c0 := n.hosts[0].closed[c]
			_, c1 := n.hosts[1].closed[s]
			return s != 0 && c0 && c1
		})
		if !ok {
			t.Fatalf("seed %d: not finished: up %d/%d down %d/%d\n%v", seed, offUp, len(up), offDown, len(down), n)
		}
		if !bytes.Equal(n.hosts[1].got(s), up) || !bytes.Equal(n.hosts[0].got(c), down) {
			t.Fatalf("seed %d: content mismatch", seed)
		}
		if seed%50 == 0 {
			t.Logf("seed %d: %d+%d bytes in %v virtual, %d frames", seed, len(up), len(down), time.Duration(n.now), n.sent)
		}
		if n.hosts[0].closed[c] != nil || n.hosts[1].closed[s] != nil {
			t.Fatalf("seed %d: close errors %v %v", seed, n.hosts[0].closed[c], n.hosts[1].closed[s])
		}
	}
}
