// Package ndp is the sans-IO core of the NDP transport (Handley et al.,
// SIGCOMM 2017): wire format, per-connection sender and receiver state
// machines, connection table, time-wait and path scoreboard.
//
// It has no goroutines, no syscalls and no clock. The host loop (the
// engine's core thread, or the simulator) owns one Endpoint per interface
// and drives it:
//
//	for each received frame:        e.HandleFrame(frame, now)
//	drain events:                   e.PollEvent()
//	    EventPulls     -> pull queue Enqueue(Handle, Count, Priority, hints)
//	    EventDropPulls -> pull queue Drop(Handle)
//	    EventAccepted / EventReadable / EventWritable / EventClosed -> application
//	when the pull pacer releases a pull for h: e.PullReleased(h, now)
//	transmit:                       for { n, pushed := e.PollFrame(buf, now, tokens); if n == 0 { break } ... }
//	timers:                         t, ok := e.NextTimer(); at t: e.HandleTimers(now)
//	a poll that received nothing:   e.HandleIdle(now) (time-wait room for the next close; optional:
//	                                a host that calls it gets clean closes at its next timer check)
//
// Frames are Ethernet II / IPv4 / UDP / NDP header (see wire.go and
// docs/wire.md). ParseFrame and BuildFrame never allocate; PollFrame builds
// data frames directly into the caller's buffer (at least MaxFrameLen(MTU)
// bytes). HandleFrame does not retain the frame. The switch helpers
// (TrimFrame, BounceFrame, IsTrimmable, IsControl, FrameDst, FramePriority)
// work in place for internal/fabric and cmd/ndpswitch. Package
// ndp/ndplayer registers a gopacket layer for the same format.
//
// Inside an Endpoint: a connection table (open addressing, keyed by remote
// IP, ports and connection id; it indexes the time-wait entries too) maps
// frames to pooled connection objects,
// each with a sender (send ring, packet descriptors by sequence number,
// retransmission set resent lowest sequence first, push/pull/unsolicited
// credits, an adaptive RTO: RFC 6298 estimate per connection, Karn's rule,
// backoff, seeded from per-destination and endpoint-wide estimates, see
// rtt.go) and a receiver
// (sequence bitmaps, reassembly ring, pull accounting and flow control)
// and a path Scoreboard. Outputs wait in a control-frame queue (ACK, NACK,
// PULL, RESET: sent first) and in ready queues of connections with pulled
// or unsolicited data (round robin). Events coalesce per connection.
// Timers are one deadline per connection in an indexed heap, plus the
// time-wait FIFO. Nothing on the path of HandleFrame, PollFrame or
// PullReleased allocates in steady state.
//
// Protocol summary (paper section 3.2): a dialer registers a connection
// (Dial) and pushes up to IW packets at once, each with SYN and its offset
// from the initial sequence number, so whichever arrives first opens the
// connection at the listener. The receiver ACKs every data packet and NACKs
// every trimmed header at once, and every arrival yields one pull (an
// EventPulls for the host's single pull queue). A PULL carries a
// per-connection counter; the sender sends as many packets as it advanced,
// retransmissions first. The sender marks LAST on its last packet of
// available data; the receiver then drops the connection's queued pulls,
// and data written later is pushed again. A short RTO (adaptive, never below
// Config.RTO) recovers real loss on another path; packets are sprayed over a
// per-round random permutation of paths, with a scoreboard that excludes outlier paths; bounced headers are
// resent only when no more PULLs are expected or the network looks
// asymmetric. Time-wait at both ends gives at-most-once connection
// semantics. See docs/decisions.md "## ndp" for the choices the
// paper leaves open (abort, flow control, FIN, unknown connections).
package ndp
