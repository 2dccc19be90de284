package ndp

import "math/bits"

// rng is a small deterministic PRNG (splitmix64). The Endpoint owns one,
// seeded from Config.Seed, so runs are reproducible in the simulator.
type rng struct{ s uint64 }

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// intn returns a value in [0, n) for n > 0 (Lemire's multiply-shift; the
// tiny bias is irrelevant for path permutations).
func (r *rng) intn(n int) int {
	hi, _ := bits.Mul64(r.next(), uint64(n))
	return int(hi)
}
