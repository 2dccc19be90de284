package engine

import "github.com/ndpstack/ndpstack/ndp"

// NextDeadline is when the stack next needs a Poll without any input: the
// earliest endpoint timer (RTO, stall probe, time-wait expiry), paced PULL
// release or edge-pacer retry, or now when output is already waiting (a
// transmit a waiter deferred, or frames the link had no buffer for). ok is
// false when nothing is due until input arrives (a frame on the link or an
// API call), and on a closed stack.
//
// An embedder that drives the stack itself (Config.NoBackground: ndpd's
// core loop) sleeps until the deadline instead of waking on a fixed cap.
// It takes the stack lock; the answer holds until the next Poll or API
// call, either of which may move it earlier.
func (s *Stack) NextDeadline() (t ndp.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, false
	}
	now := s.clock()
	if s.txDeferred || (s.pushRetry == 0 && s.ep.HasOutput()) {
		// A flush that emptied the endpoint leaves HasOutput false; true
		// with no pacer hold means the last flush stopped short (no
		// transmit buffer) or was deferred: poll again at once.
		return now, true
	}
	d := s.sleepForLocked(now)
	if d < 0 {
		return 0, false
	}
	return now + ndp.Time(d), true
}
