package sockapi

import "time"

// DialOption sets a per-connection option of Dial, Call and SendMessage.
type DialOption func(*dialOptions)

// WithSize is the D3 size hint: the total bytes this connection will send.
// The receiver's pull scheduler uses it (with WithDeadline) to give the
// flow the rate it needs.
func WithSize(bytes int64) DialOption {
	return func(o *dialOptions) { o.size = bytes }
}

// WithDeadline is the D3 deadline hint: when the last byte must have
// arrived. With WithSize the receiver reserves the needed rate; if the
// deadline cannot be met the connection fails at once at both ends with
// ErrDeadlineUnmeetable (quenched) rather than finishing late. It is a
// scheduling hint, distinct from SetDeadline (which bounds a local call).
func WithDeadline(t time.Time) DialOption {
	return func(o *dialOptions) { o.d3Deadline = t }
}

// WithPriority puts the connection in a strict priority class (0 =
// normal, higher is served first by receivers using the priority policy).
func WithPriority(class uint8) DialOption {
	return func(o *dialOptions) { o.priority = class }
}

// WithPacing asks the sending host's edge pacer (token bucket) to pace this
// connection's pushed first-RTT packets instead of sending them back to back.
func WithPacing() DialOption {
	return func(o *dialOptions) { o.paced = true }
}

// WithDialTimeout bounds how long Dial may block (neighbour resolution;
// the NDP dial itself never waits for the network).
func WithDialTimeout(d time.Duration) DialOption {
	return func(o *dialOptions) { o.timeout = d }
}
