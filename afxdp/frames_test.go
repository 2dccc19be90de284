package afxdp

import (
	"errors"
	"testing"
)

func TestFrameLedgerMoves(t *testing.T) {
	tests := []struct {
		name      string
		run       func(l *frameLedger) error
		wantErr   bool
		wantCheck bool // Accounting.Check passes afterwards
	}{
		{"alloc then release", func(l *frameLedger) error {
			i, _ := l.pop(OwnerApp)
			return asErr(l.push("release", i, OwnerApp))
		}, false, true},
		{"double release", func(l *frameLedger) error {
			i, _ := l.pop(OwnerApp)
			if err := l.push("release", i, OwnerApp); err != nil {
				return err
			}
			return asErr(l.push("release", i, OwnerApp))
		}, true, false},
		{"transmit a free frame", func(l *frameLedger) error {
			return asErr(l.move("transmit", 3, OwnerApp, OwnerTx))
		}, true, false},
		{"leaked app frame", func(l *frameLedger) error {
			_, _ = l.pop(OwnerApp)
			return nil
		}, false, false},
		{"full cycle fill-rx-tx-complete", func(l *frameLedger) error {
			i, _ := l.pop(OwnerFill)
			if err := l.move("receive", i, OwnerFill, OwnerApp); err != nil {
				return err
			}
			if err := l.move("transmit", i, OwnerApp, OwnerTx); err != nil {
				return err
			}
			return asErr(l.push("complete", i, OwnerTx))
		}, false, true},
		{"frame index out of range", func(l *frameLedger) error {
			return asErr(l.move("receive", 99, OwnerFill, OwnerApp))
		}, true, false},
		{"frames left on fill ring are fine", func(l *frameLedger) error {
			_, _ = l.pop(OwnerFill)
			return nil
		}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newFrameLedger(8)
			err := tt.run(l)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrFrameOwnership) {
				t.Fatalf("err %v does not match ErrFrameOwnership", err)
			}
			if cerr := l.accounting().Check(); (cerr == nil) != tt.wantCheck {
				t.Fatalf("Check() = %v, want pass=%v (%+v)", cerr, tt.wantCheck, l.accounting())
			}
		})
	}
}

func asErr(e *FrameError) error {
	if e == nil {
		return nil
	}
	return e
}

func TestFrameLedgerExhaustion(t *testing.T) {
	l := newFrameLedger(4)
	seen := map[uint32]bool{}
	for range 4 {
		i, ok := l.pop(OwnerApp)
		if !ok || seen[i] {
			t.Fatalf("pop = %d, %v (seen %v)", i, ok, seen)
		}
		seen[i] = true
	}
	if _, ok := l.pop(OwnerApp); ok {
		t.Fatal("pop from empty free list succeeded")
	}
	for i := range seen {
		if err := l.push("release", i, OwnerApp); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.accounting().Check(); err != nil {
		t.Fatal(err)
	}
}

func TestFrameLedgerNoAllocs(t *testing.T) {
	l := newFrameLedger(64)
	allocs := testing.AllocsPerRun(1000, func() {
		i, _ := l.pop(OwnerFill)
		_ = l.move("receive", i, OwnerFill, OwnerApp)
		_ = l.move("transmit", i, OwnerApp, OwnerTx)
		_ = l.push("complete", i, OwnerTx)
	})
	if allocs != 0 {
		t.Fatalf("ledger allocates %v per cycle", allocs)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		mut  func(c *Config)
		ok   bool
	}{
		{"defaults", func(c *Config) {}, true},
		{"no interface", func(c *Config) { c.Interface = "" }, false},
		{"no port", func(c *Config) { c.UDPPort = 0 }, false},
		{"frame 3000", func(c *Config) { c.FrameSize = 3000 }, false},
		{"frame 4096", func(c *Config) { c.FrameSize = 4096 }, true},
		{"ring not pow2", func(c *Config) { c.RingSize = 1000 }, false},
		{"headroom too big", func(c *Config) { c.Headroom = 512 }, false},
		{"headroom ok", func(c *Config) { c.Headroom = 128 }, true},
		{"too few frames", func(c *Config) { c.NumFrames = 100 }, false},
		{"dup queue", func(c *Config) { c.Queues = []int{1, 1} }, false},
		{"neg queue", func(c *Config) { c.Queues = []int{-1} }, false},
		{"bad bind", func(c *Config) { c.Bind = 9 }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Config{Interface: "eth0", UDPPort: 9000}
			tt.mut(&c)
			c.populate()
			err := c.validate()
			if (err == nil) != tt.ok {
				t.Fatalf("validate() = %v, want ok=%v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("%v is not ErrInvalidConfig", err)
			}
		})
	}
}

// TestFrameLedgerSentFramesTransmitAgain: a frame back from transmission is
// the next one Alloc hands out (before frames released after receiving),
// and the last one a fill-ring refill takes.
func TestFrameLedgerSentFramesTransmitAgain(t *testing.T) {
	l := newFrameLedger(8)
	rx, _ := l.pop(OwnerFill)
	tx, _ := l.pop(OwnerApp)
	if err := l.move("receive", rx, OwnerFill, OwnerApp); err != nil {
		t.Fatal(err)
	}
	if err := l.move("transmit", tx, OwnerApp, OwnerTx); err != nil {
		t.Fatal(err)
	}
	if err := l.push("complete", tx, OwnerTx); err != nil {
		t.Fatal(err)
	}
	if err := l.push("release", rx, OwnerApp); err != nil {
		t.Fatal(err)
	}
	if got, _ := l.pop(OwnerApp); got != tx {
		t.Fatalf("Alloc got frame %d, want the transmitted frame %d", got, tx)
	}
	if err := l.push("release", tx, OwnerApp); err != nil {
		t.Fatal(err)
	}
	// Drain for the fill ring: the transmitted frame comes last.
	l2 := newFrameLedger(3)
	a, _ := l2.pop(OwnerApp)
	_ = l2.move("transmit", a, OwnerApp, OwnerTx)
	_ = l2.push("complete", a, OwnerTx)
	var order []uint32
	for {
		i, ok := l2.pop(OwnerFill)
		if !ok {
			break
		}
		order = append(order, i)
	}
	if len(order) != 3 || order[2] != a {
		t.Fatalf("fill order %v, want the transmitted frame %d last", order, a)
	}
	if acc := l2.accounting(); acc.Fill != 3 || acc.Free != 0 {
		t.Fatalf("accounting %+v", acc)
	}
}
