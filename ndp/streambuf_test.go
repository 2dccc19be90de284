package ndp

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// A streamBuf used as a FIFO (write at hi, read at lo) with random sizes,
// growing from 0 to its limit across wrap-arounds, returns exactly the
// bytes written.
func TestStreamBufGrowsAcrossWrap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, limit := range []int{1000, 16 << 10, 100_000, 256 << 10} {
		b := newStreamBuf(limit, false, false)
		var lo, hi uint64
		var ref []byte // bytes [lo, hi)
		src := pattern(7, 4*limit)
		for step := 0; step < 2000; step++ {
			if r.IntN(2) == 0 {
				n := min(r.IntN(limit/3+1), limit-int(hi-lo))
				p := src[int(hi)%len(src)/2:][:n]
				b.ensure(lo, hi, hi+uint64(n))
				b.put(hi, p)
				ref = append(ref, p...)
				hi += uint64(n)
			} else {
				n := r.IntN(int(hi-lo) + 1)
				got := make([]byte, n)
				b.get(got, lo)
				if !bytes.Equal(got, ref[:n]) {
					t.Fatalf("limit %d step %d: read mismatch", limit, step)
				}
				ref = ref[n:]
				lo += uint64(n)
			}
			if len(b.buf) > limit {
				t.Fatalf("buffer %d beyond limit %d", len(b.buf), limit)
			}
		}
	}
}
