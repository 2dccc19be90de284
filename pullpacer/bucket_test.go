package pullpacer

import (
	"errors"
	"math"
	"testing"

	"github.com/ndpstack/ndpstack/ndp"
)

func TestTokenBucketTable(t *testing.T) {
	// 1 Gb/s = 1 byte per 8 ns; depth 3000 bytes.
	b, err := NewTokenBucket(BucketConfig{Rate: 1e9, Depth: 3000}, 0)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		now   ndp.Time
		bytes int
		allow bool
		next  ndp.Time // NextAllowed before the Allow call
	}{
		{0, 1500, true, 0},
		{0, 1500, true, 0},
		{0, 1, false, 8},           // empty: one byte takes 8 ns
		{0, 1500, false, 12000},    // 1500 bytes take 12 µs
		{6000, 1500, false, 12000}, // half refilled
		{12000, 1500, true, 12000},
		{12000, 3001, false, math.MaxInt64}, // larger than the bucket: never
		{1_000_000, 3000, true, 1_000_000},  // long idle refills to depth, no more
		{1_000_000, 1, false, 1_000_008},
		{999_000, 1, false, 1_000_008}, // clock going backwards earns nothing
	}
	for k, s := range steps {
		if next := b.NextAllowed(s.now, s.bytes); next != s.next {
			t.Errorf("step %d: NextAllowed(%d, %d) = %d, want %d", k, s.now, s.bytes, next, s.next)
		}
		if got := b.Allow(s.now, s.bytes); got != s.allow {
			t.Errorf("step %d: Allow(%d, %d) = %v, want %v", k, s.now, s.bytes, got, s.allow)
		}
	}
	if a, d := b.Counts(); a != 4 || d != 6 {
		t.Errorf("counts %d/%d", a, d)
	}
}

func TestTokenBucketConfig(t *testing.T) {
	for _, cfg := range []BucketConfig{{Rate: 0}, {Rate: -1}, {Rate: 1e9, Depth: -1}, {Rate: 1e9, Depth: 2 << 30}} {
		if _, err := NewTokenBucket(cfg, 0); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: err %v", cfg, err)
		}
	}
	b, err := NewTokenBucket(BucketConfig{Rate: 1e9}, 0)
	if err != nil || b.Tokens(0) != defaultBucketDepth {
		t.Fatalf("default depth: %v %d", err, b.Tokens(0))
	}
}

// TestTokenBucketConformance drives a greedy sender of mixed packet sizes through the
// bucket and checks the token bucket arrival curve on every pair of sends: bytes sent
// in [t1, t2] <= Depth + Rate x (t2 - t1), and that the long-run rate reaches Rate.
func TestTokenBucketConformance(t *testing.T) {
	for _, tc := range []struct {
		rate  int64
		depth int
	}{{1e9, 3076}, {10e9, 9000}, {25e9, 64 * 1024}, {100e6, 1538}} {
		b, err := NewTokenBucket(BucketConfig{Rate: tc.rate, Depth: tc.depth}, 0)
		if err != nil {
			t.Fatal(err)
		}
		sizes := []int{64, 1538, 700, 1538, 1538, 200}
		type send struct {
			at    ndp.Time
			bytes int
		}
		var sends []send
		now := ndp.Time(0)
		for k := 0; len(sends) < 3000; k++ {
			sz := min(sizes[k%len(sizes)], tc.depth)
			// Sometimes the sender goes quiet, then bursts.
			if k%500 == 499 {
				now += 1_000_000
			}
			now = b.NextAllowed(now, sz)
			if !b.Allow(now, sz) {
				t.Fatalf("Allow refused at the time NextAllowed gave")
			}
			sends = append(sends, send{now, sz})
		}
		for i := range sends {
			total := 0
			for j := i; j < len(sends); j++ {
				total += sends[j].bytes
				limit := float64(tc.depth) + float64(tc.rate)*float64(sends[j].at-sends[i].at)/8e9
				if float64(total) > limit+1e-6 {
					t.Fatalf("rate %d depth %d: %d bytes in [%d,%d] > %.1f", tc.rate, tc.depth, total, sends[i].at, sends[j].at, limit)
				}
			}
		}
		// Long-run rate over the first busy stretch (no quiet gaps).
		bytes := 0
		for _, s := range sends[:499] {
			bytes += s.bytes
		}
		rate := float64(bytes-tc.depth) * 8e9 / float64(sends[498].at-sends[0].at)
		if math.Abs(rate-float64(tc.rate))/float64(tc.rate) > 0.01 {
			t.Errorf("greedy sender got %.4g bit/s, want %d", rate, tc.rate)
		}
	}
}

func TestTokenBucketZeroAlloc(t *testing.T) {
	b, _ := NewTokenBucket(BucketConfig{Rate: 10e9, Depth: 9000}, 0)
	now := ndp.Time(0)
	if n := testing.AllocsPerRun(1000, func() {
		now = b.NextAllowed(now, 1538)
		b.Allow(now, 1538)
	}); n != 0 {
		t.Fatalf("%v allocs", n)
	}
}
