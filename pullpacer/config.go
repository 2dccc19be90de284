package pullpacer

import (
	"errors"
	"fmt"
	"time"
)

// Policy selects how the pull queue shares the receiver's downlink between connections.
type Policy uint8

const (
	// PolicyFair (the zero value) serves connections round robin, one pull each
	// (deficit round robin with a quantum of one MTU-sized pull). Priority hints are
	// ignored. A connection with no pulls queued is not in the rotation, so a
	// sender-limited connection receives pull slots exactly as fast as its data
	// arrives and never wastes one (NDP paper, Figure 21).
	PolicyFair Policy = iota
	// PolicyPriority serves strict priority classes (Flow.Priority, higher first),
	// round robin within a class.
	PolicyPriority
	// PolicyDeadline runs D3's rate allocation at the receiver for its own downlink
	// (deadline.go): class 0 flows with a size and deadline get their desired rate plus
	// a fair share of spare capacity, served by weighted fair queuing; flows that cannot
	// make their deadline are quenched. Priority classes above 0 stay strict and round
	// robin, as under PolicyPriority.
	PolicyDeadline
)

func (p Policy) String() string {
	switch p {
	case PolicyFair:
		return "fair"
	case PolicyPriority:
		return "priority"
	case PolicyDeadline:
		return "deadline"
	}
	return fmt.Sprintf("Policy(%d)", uint8(p))
}

// ParsePolicy maps "fair", "priority" or "deadline" to a Policy.
func ParsePolicy(s string) (Policy, error) {
	switch s {
	case "", "fair":
		return PolicyFair, nil
	case "priority":
		return PolicyPriority, nil
	case "deadline":
		return PolicyDeadline, nil
	}
	return 0, &ConfigError{Field: "Policy", Reason: fmt.Sprintf("unknown policy %q", s)}
}

// Sentinel errors.
var (
	// ErrInvalidConfig is matched (errors.Is) by every *ConfigError.
	ErrInvalidConfig = errors.New("pullpacer: invalid config")
)

// ConfigError names the configuration field that failed validation.
type ConfigError struct {
	Field  string
	Reason string
}

func (e *ConfigError) Error() string {
	return "pullpacer: invalid config: " + e.Field + ": " + e.Reason
}

// Is makes errors.Is(err, ErrInvalidConfig) true.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// QueueConfig configures one pull queue (one per host interface).
type QueueConfig struct {
	// LinkRate is the receiver's link rate in bits per second. Required (> 0).
	LinkRate int64
	// PullBytes is the number of wire bytes one MTU-sized data packet occupies on the
	// receiver's link (what one PULL elicits), e.g. 1500 + 14 Ethernet header + 4 FCS +
	// 20 preamble and inter-frame gap = 1538. Required (> 0).
	PullBytes int
	// Gamma scales the pull rate to gamma x LinkRate (HULL bandwidth headroom), so the
	// downlink never builds a standing queue. Zero means 1.0; must be in (0, 1].
	Gamma float64
	// Policy selects fair, strict-priority or deadline (D3) scheduling. Zero is PolicyFair.
	Policy Policy
	// MaxBurst is the most PULLs released back to back when the queue catches up after
	// a stall (the caller called Next late). Zero means 2; must be >= 1. With 1 no slot
	// missed during a stall is ever made up.
	MaxBurst int
	// MaxConns bounds the number of connections tracked at once; Add or SetFlow for a new
	// handle beyond it is rejected and counted. Zero means 65536.
	MaxConns int
	// ExpectedConns presizes the connection table so steady state never grows it.
	// Zero means 1024.
	ExpectedConns int
	// BaseRate (PolicyDeadline) is the floor rate in bits/s every flow keeps when the
	// deadline demand oversubscribes the link, so it can still make progress (D3's base
	// rate). Zero means capacity/1000. It is lowered to capacity/N when N flows would
	// otherwise reserve more than the link.
	BaseRate int64
	// Reallocate (PolicyDeadline) is how often the D3 allocation is recomputed while
	// pulls are being released; it is also recomputed at once after any hint, new flow,
	// removal or quench. Zero means 100µs.
	Reallocate time.Duration
}

const (
	defaultMaxBurst      = 2
	defaultMaxConns      = 65536
	defaultExpectedConns = 1024
	defaultReallocate    = 100 * time.Microsecond
)

// withDefaults returns a copy of c with zero values replaced by defaults.
func (c QueueConfig) withDefaults() QueueConfig {
	if c.Gamma == 0 {
		c.Gamma = 1.0
	}
	if c.MaxBurst == 0 {
		c.MaxBurst = defaultMaxBurst
	}
	if c.MaxConns == 0 {
		c.MaxConns = defaultMaxConns
	}
	if c.ExpectedConns == 0 {
		c.ExpectedConns = defaultExpectedConns
	}
	if c.ExpectedConns > c.MaxConns {
		c.ExpectedConns = c.MaxConns
	}
	if c.Reallocate == 0 {
		c.Reallocate = defaultReallocate
	}
	return c
}

// validate checks a config that went through withDefaults.
func (c QueueConfig) validate() error {
	switch {
	case c.LinkRate <= 0:
		return &ConfigError{Field: "LinkRate", Reason: "must be > 0 bits/s"}
	case c.PullBytes <= 0:
		return &ConfigError{Field: "PullBytes", Reason: "must be > 0"}
	case !(c.Gamma > 0 && c.Gamma <= 1):
		return &ConfigError{Field: "Gamma", Reason: "must be in (0, 1]"}
	case c.Policy > PolicyDeadline:
		return &ConfigError{Field: "Policy", Reason: "unknown policy " + c.Policy.String()}
	case c.MaxBurst < 1:
		return &ConfigError{Field: "MaxBurst", Reason: "must be >= 1"}
	case c.MaxConns < 1:
		return &ConfigError{Field: "MaxConns", Reason: "must be >= 1"}
	case c.ExpectedConns < 0:
		return &ConfigError{Field: "ExpectedConns", Reason: "must be >= 0"}
	case c.BaseRate < 0:
		return &ConfigError{Field: "BaseRate", Reason: "must be >= 0"}
	case c.Reallocate < 0:
		return &ConfigError{Field: "Reallocate", Reason: "must be >= 0"}
	}
	iv := c.interval()
	if iv.ns < 1 {
		return &ConfigError{Field: "LinkRate", Reason: "pull interval below 1ns (rate too high for PullBytes)"}
	}
	if iv.ns > int64(time.Hour) {
		return &ConfigError{Field: "LinkRate", Reason: "pull interval above 1h (rate too low)"}
	}
	return nil
}

// capacity is the pull rate budget in bits/s: gamma x LinkRate.
func (c QueueConfig) capacity() float64 { return c.Gamma * float64(c.LinkRate) }

// interval is the spacing between PULLs: PullBytes x 8 / (gamma x LinkRate), kept in
// nanoseconds plus a picosecond remainder so long runs do not drift.
func (c QueueConfig) interval() spacing {
	ps := float64(c.PullBytes) * 8 * 1e12 / c.capacity()
	total := int64(ps + 0.5)
	return spacing{ns: total / 1000, ps: total % 1000}
}

// spacing is a duration with sub-nanosecond resolution: ns nanoseconds + ps picoseconds
// (0 <= ps < 1000).
type spacing struct {
	ns, ps int64
}

// Interval returns the configured PULL spacing, rounded to the nanosecond.
func (c QueueConfig) Interval() time.Duration {
	c = c.withDefaults()
	iv := c.interval()
	d := iv.ns
	if iv.ps >= 500 {
		d++
	}
	return time.Duration(d)
}
