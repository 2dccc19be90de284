package ndp

import "time"

// Stats are cumulative counters of an Endpoint. They are plain integers
// updated by the single goroutine that owns the Endpoint.
type Stats struct {
	FramesIn, FramesOut uint64
	DataIn, DataOut     uint64 // untrimmed DATA frames received / sent (including retransmissions)
	BytesIn, BytesOut   uint64 // payload bytes of DATA frames
	PushedOut           uint64 // DATA sent unsolicited (first RTT, after LAST, RTO, probes)
	PulledOut           uint64 // DATA sent in answer to PULLs
	AcksIn, AcksOut     uint64 // ACK frames (one may acknowledge several packets: Config.CoalesceControl)
	NacksIn, NacksOut   uint64
	PullsIn, PullsOut   uint64 // PULLs (own frames, or carried by ACK frames: Config.CoalesceControl)
	ResetsIn, ResetsOut uint64
	TrimmedIn           uint64 // trimmed headers received (receiver side)
	BouncedIn           uint64 // own headers returned by a switch
	BouncedResent       uint64 // bounced headers resent at once (return-to-sender rule)
	Retransmits         uint64 // DATA retransmissions (any cause)
	RTOFires            uint64 // packets declared lost by the RTO
	StallProbes         uint64 // unsolicited probes after StallTimeout
	SilenceProbes       uint64 // keepalives sent by connections silent for a while (silence.go)
	SilenceResumes      uint64 // probing connections that heard from their peer again
	UserTimeouts        uint64 // connections failed with ErrTimeout: silent for Config.UserTimeout
	DuplicatesIn        uint64 // DATA already received (re-ACKed)
	NoBufferNacks       uint64 // DATA NACKed because the receive buffer was full
	Malformed           uint64 // frames rejected by ParseFrame
	WrongPort           uint64 // valid frames for another UDP port or IP
	UnknownConn         uint64 // frames for no connection and no time-wait entry
	TimeWaitRejects     uint64 // frames for connections in time-wait
	TimeWaitEvicted     uint64 // time-wait entries evicted early (table full, or trimmed by HandleIdle)
	Refused             uint64 // SYNs refused (no listener / table full)
	ControlDrops        uint64 // control frames dropped: control queue full
	ControlMerged       uint64 // ACKs and PULLs merged into an already queued frame (Config.CoalesceControl)
	OutOfWindow         uint64 // DATA outside the receive sequence window
	PathsExcluded       uint64 // path exclusions by the scoreboard
	ConnsOpened         uint64
	ConnsClosed         uint64
	ConnsActive         int
	TimeWaitActive      int

	// Adaptive RTO (see Config.RTO). Spurious retransmissions that went out
	// show up at the peer as DuplicatesIn.
	RTTSamples     uint64                 // valid (Karn) RTT samples: ACKs known to answer one particular copy (rtt.go)
	RTTHist        [RTTHistBuckets]uint64 // samples by size: [0] < 1µs, [i] in [2^(i-1), 2^i) µs, last ≥ 131ms
	SRTT, RTTVar   time.Duration          // endpoint-wide estimate over all samples (seeds new connections)
	RTOMin, RTOMax time.Duration          // smallest / largest base RTO (before backoff) any connection used
	RTOBackoffs    uint64                 // timeout rounds that doubled a connection's RTO
	HostStalls     uint64                 // host stalls of RTO/4 or more (NoteStall): every RTO is at least twice the longest, halved every second
	SpuriousRTOs   uint64                 // packets declared lost by the RTO whose declared-lost copy was ACKed (before the resend, or told apart by path after it)
}
