// Package engine is ndpstack's core loop (NDP paper section 4): it binds a
// Link (AF_XDP queue, or an in-memory cable), one ndp.Endpoint, the host's
// pullpacer.PullQueue, the edge pacer (token bucket) and a neighbour cache,
// and drives them in run-to-completion batches.
//
// # One Poll batch
//
//	Link.Receive(rx[:Batch])           frames from the NIC (UMEM or memory)
//	  -> Endpoint.HandleFrame          DATA: ACK/NACK queued, PULLs owed;
//	                                   ACK/NACK/PULL: sender state; PULLs
//	                                   make RTX go before new data
//	  -> events (drained once per batch, coalesced per connection):
//	             EventPulls     -> PullQueue.Add
//	             EventDropPulls -> PullQueue.Drop (sender's LAST seen)
//	             EventAccepted  -> Listener backlog (port from the frame)
//	             Readable/Writable/Closed -> wake the Conn's waiters
//	Link.ReleaseReceived()
//	  (or, when nothing arrived, Endpoint.HandleIdle: time-wait trimmed
//	   ahead of the next close)
//	PullQueue.Next(now+horizon) once one is due: the PULLs of the next
//	  PullBatch slots -> Endpoint.PullReleased (PULL frames, one per
//	                     connection per batch)
//	Endpoint.HandleTimers if NextTimer <= now (RTO, stall probes, time-wait)
//	  (skipped, with the transmit below, by a PollBusy waiter's batch
//	   that received frames: the next poll runs both, pollDeferLocked)
//	Link.AllocTx(tx[:Batch]) -> Endpoint.PollFrame into each buffer
//	                           (control first, then pulled data, then
//	                           first-RTT pushes; paced pushes only while the
//	                           token bucket allows) -> Link.Transmit(batch)
//	unlock, then Link.Kick             the syscall, without the lock
//
// Nothing in a batch allocates, logs or makes a per-packet syscall. The
// AF_XDP link's Transmit only puts the batch on the TX ring; its Kick (one
// sendto, only when need_wakeup asks) is made after the stack's lock is
// released (Stack.unlock), because in copy mode the sendto runs the
// frames' delivery into the peer and the other waiters of the stack would
// wait for it.
//
// # Who polls
//
// All Stack state is guarded by one mutex taken per batch or per API call.
// The goroutine that waits (Read, Accept, Write on a full buffer) drives the
// stack itself: it polls, checks its condition, and in PollBusy mode spins
// until it holds. A spinning waiter that finds the mutex held does not
// queue for it (TryLock): the holder is polling, and it tries again after
// a yield. In PollAdaptive mode it spins for Config.Spin and then
// sleeps: on the link itself (ppoll on the XSK fd and an eventfd) if no
// other goroutine does, so the kernel wakes it directly when a frame
// arrives; otherwise on its connection's channel, signalled by whoever
// polls. A background poller goroutine polls only while no application
// goroutine spins, and sleeps on the link once idle, until frames arrive,
// the next timer or pull release is due, or an API call wakes it
// (Config.NoBackground removes it). On a 2-vCPU machine this keeps one
// spinning thread per side in an RPC ping-pong.
//
// With Config.Spin negative nothing spins: a waiter sleeps at once and the
// background poller as soon as it is idle, each until the next timer or
// pull release however close it is (a spinning stack polls through
// deadlines under 200 µs, which a ppoll would oversleep). Paired with
// XDPConfig.RuntimeWait, the link sleeper parks in the Go runtime's
// netpoller instead of a thread blocked in ppoll (which keeps its P), so
// many stacks in one process on few CPUs wait the way goroutines on
// kernel sockets do.
//
// When the waiting goroutine is expected to call again at once (PollBusy,
// or no background poller), the ACKs a receive batch produced wait for the
// application's answer and leave in the same transmit batch (one kick),
// DATA frames first.
//
// # Neighbours
//
// Dial needs the peer's MAC. A Resolver supplies it: KernelResolver reads
// the kernel's neighbour table through rtnetlink and, when the entry is
// missing, makes the kernel ARP for it (a datagram from a kernel socket);
// StaticResolver serves in-memory links. Results are cached for
// Config.NeighborTTL. Accepted connections learn the MAC from the frame.
//
// # Counters and capture
//
// Stats copies the counters under the stack's lock. StatsSnapshot (what a
// metrics scrape uses) does not take it while the stack is busy: it raises
// a flag that the next Poll batch, already holding the lock, answers by
// publishing a copy through an atomic pointer (statsboard.go). With
// Config.Capture set, each batch's received frames (after Receive) and
// transmitted frames (before Transmit) are copied into the capture's
// bounded buffer (internal/capture); without it, one nil check per batch.
package engine
