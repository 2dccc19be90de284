package fabric

import "github.com/ndpstack/ndpstack/ndp"

// ReturnToSender bounces a header that arrived already trimmed (by a switch earlier on
// its path, or a sender's header-only probe) and that Enqueue dropped because this
// port's header queue was full. Enqueue treats such a frame like any control frame and
// drops it; in a multi-hop fabric the paper's rule (section 3.2.4: when the header queue
// overflows the switch returns the header to its sender) applies to it as well, and
// without it the sender would wait for its RTO. A switch calls ReturnToSender on a
// Dropped verdict: for a trimmed, not yet bounced DATA header with return-to-sender
// enabled it turns the frame into a return-to-sender header in place (ndp.BounceFrame),
// moves the count from Dropped to Bounced and reports true; the caller routes the frame
// back toward its new destination. For anything else it changes nothing and reports
// false (the frame stays dropped).
//
// It lives in its own file because it was added by the simulator's FatTree work
// (internal/sim) without changing Enqueue's contract for the software switch.
func (p *Port) ReturnToSender(frame []byte) bool {
	if p.cfg.NoReturnToSender || p.cfg.Trimmer != nil {
		return false
	}
	const ndpOff = ndp.HeaderOverhead - ndp.NDPHeaderLen
	if len(frame) < ndp.HeaderOverhead || ndp.IsTrimmable(frame) || !ndp.IsControl(frame) {
		return false
	}
	var h ndp.Header
	if ndp.ParseHeader(frame[ndpOff:], &h) != nil || h.Type != ndp.TypeData ||
		h.Flags&ndp.FlagTrimmed == 0 || h.Flags&ndp.FlagBounced != 0 {
		return false
	}
	if ndp.BounceFrame(frame) != nil {
		return false
	}
	p.stats.Dropped--
	p.stats.Bounced++
	return true
}
