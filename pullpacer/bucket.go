package pullpacer

import (
	"math"

	"github.com/ndpstack/ndpstack/ndp"
)

// BucketConfig configures an edge pacer token bucket (HULL section 4: pace pushed,
// unsolicited bursts at the edge instead of blasting them into the fabric).
type BucketConfig struct {
	// Rate is the long-run rate in bits per second. Required (> 0).
	Rate int64
	// Depth is the bucket size in bytes: the largest burst sent back to back after an
	// idle period, and the largest single packet that can ever conform. Zero means
	// 3076 (two 1538-byte wire frames); use more for jumbo frames. At most 1 GiB.
	Depth int
}

const (
	defaultBucketDepth = 2 * 1538
	maxBucketDepth     = 1 << 30
	// tokenScale: tokens are kept in units of 1e-9 bit, so rate (bits/s) x elapsed (ns)
	// adds exactly, with no rounding, and a byte costs 8e9 units.
	tokenScale = 8 * 1_000_000_000
)

// TokenBucket is a sans-IO token bucket: the caller passes now. The sender's transmit
// path asks it before each pushed packet (first-RTT window, data after LAST) of a
// connection or host that asked for pacing; pulled data is already paced by the
// receiver and bypasses it. Zero allocation; not safe for concurrent use.
type TokenBucket struct {
	rate   int64 // bits/s
	depth  int64 // bytes
	max    int64 // depth in token units
	tokens int64 // token units, 0..max
	fillNs int64 // ns to fill from empty
	last   ndp.Time

	allowed, denied uint64
}

// NewTokenBucket returns a full bucket whose clock starts at now.
func NewTokenBucket(cfg BucketConfig, now ndp.Time) (*TokenBucket, error) {
	if cfg.Depth == 0 {
		cfg.Depth = defaultBucketDepth
	}
	if cfg.Depth < 0 || cfg.Depth > maxBucketDepth {
		return nil, &ConfigError{Field: "Depth", Reason: "must be in [1, 1GiB] bytes"}
	}
	b := &TokenBucket{depth: int64(cfg.Depth), max: int64(cfg.Depth) * tokenScale, last: now}
	if err := b.setRate(cfg.Rate); err != nil {
		return nil, err
	}
	b.tokens = b.max
	return b, nil
}

func (b *TokenBucket) setRate(rate int64) error {
	if rate <= 0 || rate > 1e13 {
		return &ConfigError{Field: "Rate", Reason: "must be in (0, 10 Tb/s] bits/s"}
	}
	b.rate = rate
	b.fillNs = (b.max + rate - 1) / rate
	return nil
}

// SetRate changes the rate from now on; tokens earned so far are kept.
func (b *TokenBucket) SetRate(now ndp.Time, rate int64) error {
	b.refill(now)
	return b.setRate(rate)
}

func (b *TokenBucket) refill(now ndp.Time) {
	elapsed := int64(now - b.last)
	if elapsed <= 0 {
		return // a clock going backwards earns nothing
	}
	b.last = now
	if elapsed >= b.fillNs {
		b.tokens = b.max
		return
	}
	b.tokens = min(b.tokens+elapsed*b.rate, b.max)
}

// Allow reports whether a packet of the given wire size may be sent at now, and if so
// takes its tokens. A packet larger than Depth never conforms.
func (b *TokenBucket) Allow(now ndp.Time, bytes int) bool {
	b.refill(now)
	cost := int64(bytes) * tokenScale
	if bytes < 0 || cost > b.tokens {
		b.denied++
		return false
	}
	b.tokens -= cost
	b.allowed++
	return true
}

// NextAllowed returns the earliest time at or after now at which Allow(t, bytes) would
// succeed (assuming nothing else is sent), or math.MaxInt64 for a packet larger than
// Depth. It takes no tokens.
func (b *TokenBucket) NextAllowed(now ndp.Time, bytes int) ndp.Time {
	if bytes < 0 || int64(bytes) > b.depth {
		return math.MaxInt64
	}
	b.refill(now)
	need := int64(bytes)*tokenScale - b.tokens
	if need <= 0 {
		return now
	}
	// Tokens are counted as of b.last (>= now unless the clock went backwards).
	return max(now, b.last) + ndp.Time((need+b.rate-1)/b.rate)
}

// Tokens returns the bytes that could be sent at now (rounded down).
func (b *TokenBucket) Tokens(now ndp.Time) int64 {
	b.refill(now)
	return b.tokens / tokenScale
}

// Counts returns how many Allow calls succeeded and failed.
func (b *TokenBucket) Counts() (allowed, denied uint64) { return b.allowed, b.denied }
