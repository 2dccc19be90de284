// Package pullpacer is the receiver's pull queue and pacing clock, and the sender's
// edge pacer, for ndpstack's NDP transport.
//
// # Pull queue (sans-IO)
//
// An NDP receiver owes its sender one PULL for every data packet or trimmed header that
// arrives (NDP paper, section 3.2). All connections of one host interface share one
// PullQueue, which decides which connection's PULL leaves next and when:
//
//	ndp.Event{EventPulls, h, Count}   --Add(h, Count)------> pending[h] += Count
//	ndp.Event{EventDropPulls, h}      --Drop(h)------------> pending[h] = 0 (LAST seen)
//	hints (Priority, Size, Deadline)  --SetFlow(h, f, now)-> class / D3 deadline flow
//	bytes delivered so far            --Progress(h, n)-----> D3 remaining size
//	connection gone                   --Remove(h)
//	pulled packets came back short    --Refund(now, bytes)-> next release moves earlier
//	DATA arrived that no PULL asked   --Charge(now, bytes)-> next release moves later
//	Next(now) -> h, true   when a pull is due: the caller sends a PULL for h
//	NextAt()  -> t         when to call Next again
//	PollQuenched() -> h    D3 says h cannot make its deadline: fail it fast
//
// Pulls are counts per connection, not queue entries, so 10,000 connections with any
// backlog cost a fixed table. Releases are spaced PullBytes x 8 / (Gamma x LinkRate)
// apart, so the data they elicit arrives at Gamma times the link rate (HULL-style
// headroom keeps the downlink queue empty); DATA that arrives unpulled is charged
// to the same clock, so pulled and pushed traffic together keep to that rate. If the caller comes back late (a stall), at
// most MaxBurst pulls go back to back and the remaining missed slots are dropped, not
// bunched. Which connection is served depends on the Policy: round robin (fair, and a
// sender-limited connection never wastes slots because it is only in the round while
// it has pulls), strict priority classes, or D3 deadline allocation with weighted fair
// queuing (deadline.go). The same code runs in the simulator, which calls Next at
// NextAt on its virtual clock.
//
// # Who polls the queue
//
// The queue has no thread of its own: the stack that owns it calls Next from its
// poll loop (internal/engine's Poll, which in ndpd is the core loop of the queue's
// NIC queue) and sends the PULLs it returns in the same transmit batch as the rest of
// that poll's frames. NextAt tells the loop when to come back; a loop that comes back
// late sends at most MaxBurst pulls and drops the missed slots (LateSlots). The NDP
// paper gives pacing a thread spinning on a core of its own; here a pinned pacing
// thread kept no better time than the poll loop on a shared two-CPU machine and cost
// a CPU, so there is one code path, inline (docs/decisions.md, "pullpacer").
//
// # Edge pacer
//
// TokenBucket is the sender-side pacer for pushed, unsolicited packets (first-RTT
// windows, data after LAST) of connections or hosts that ask for pacing (HULL section
// 4): Allow(now, bytes) and NextAllowed(now, bytes), sans-IO.
package pullpacer
