// Package daemon is ndpd's engine room and its client: the ring protocol
// between the NDP core process and the applications attached to it (NDP
// paper, section 4: "passing commands such as connect and listen via a
// communications ring buffer, and data for each active socket via three
// ring buffers: RX, TX and RTX, and a shared buffer pool"; here two per
// socket, RX and TX: see "Data path and buffers" for the RTX ring).
//
// # Processes and goroutines
//
//	 application process                              ndpd
//	┌──────────────────────────────┐           ┌───────────────────────────────────┐
//	│ API goroutines:              │  region   │ Core.Run (one goroutine) owns:    │
//	│  under mu: Cmd, TX(slot),    │──────────▶│   every app's DaemonEnd,          │
//	│   Releases (producers)       │           │   the ring.Pool ledger,           │
//	│  under pollMu: Events,       │◀──────────┼─  the Transport (engine Stack)    │
//	│   Completions, RX(slot)      │           │ Server: one goroutine per control │
//	│ watchControl: EOF = gone     │◀─ control ┼─  connection (SO_PEERCRED, attach,│
//	└──────────────────────────────┘  socket   │  status, death → Core.Detach)     │
//	                                           └───────────────────────────────────┘
//
// The control socket (SOCK_SEQPACKET, server_linux.go) carries only setup:
// credentials, the ring.Attachment (region memfd, two eventfds, buffer
// memfd), status queries, and its closing, which is how each side learns
// the other died. Everything else moves through the region's rings.
//
// # Rings, owners, fields
//
// Every ring is ring package's SPSC ring: one producer goroutine in one
// process, one consumer goroutine in the other, release/acquire on the
// index words (ring/ring.go has the ordering argument). Ownership here:
//
//	ring          producer                          consumer
//	cmd           app, API goroutine under mu       Core.Run
//	event         Core.Run                          app, goroutine holding pollMu
//	completion    Core.Run                          app, goroutine holding pollMu
//	release       app, API goroutine under mu       Core.Run
//	TX(slot)      app, the writer under mu          Core.Run
//	RX(slot)      Core.Run                          app, goroutine holding pollMu
//
// (A mutex makes "one goroutine at a time" the owner; its lock/unlock
// orders successive owners, so each ring still has a single producer and
// a single consumer at any moment.)
//
// Descriptor use (ring.Desc; unused fields zero, Frame = NoFrame when no buffer):
//
//	cmd:   OpConnect    Conn=dial slot, Aux=PackAddr(remote), Cookie=connectCookie|gen<<32|slot → OpReply
//	       OpSetOption  Conn=dial slot, Flags=Opt*, Aux=value (before OpConnect; no reply)
//	       OpListen     Aux=port, Cookie=request id → OpReply
//	       OpUnlisten   Aux=port, Cookie=request id → OpReply
//	       OpCloseWrite Conn=slot: FIN once the data already on TX(slot) is written
//	       OpClose      Conn=slot: Release once TX(slot) is written → OpSlotFree on RX(slot)
//	       OpAbort      Conn=slot, Aux=ndp.ResetCode told the peer: reset now, discard TX(slot) → OpSlotFree on RX(slot)
//	event: OpReply      Conn=slot, Cookie=request's, Aux=Status
//	       EvAccepted   Conn=accept slot, Aux=PackAddr(remote), Cookie=local port, Flags=priority
//	TX:    OpData       Frame in the app's partition, Off/Len = payload
//	RX:    OpData       Frame lent from the daemon partition, Off/Len = payload
//	       OpEnd        Aux=Status: end of the receive stream (StatusOK = EOF)
//	       OpSlotFree   last descriptor of the slot's life
//	completion: Frame of a TX descriptor the daemon is done with, Conn = its slot
//	release:    Frame of an RX descriptor the app has read
//
// Ordering across rings: Go's atomics are sequentially consistent, so a
// consumer that has seen descriptor B on ring 2, which the producer
// published after descriptor A on ring 1, also sees A. The daemon relies on
// it for "close after data" (OpClose on cmd after the data on TX(slot)),
// the app for "data before the marker" (OpSlotFree after OpData on RX).
//
// # Slots
//
// A region's n socket slots are split: [0, n/2) the app allocates for
// dials, [n/2, n) the daemon allocates for accepts. A dial needs no round
// trip (zero-RTT: the app puts OpConnect on the cmd ring and its first data
// on TX(slot) right away; a refusal comes back as OpReply with an error).
// A dial to a peer the engine has not resolved yet is pending: the daemon
// resolves the MAC off the core loop (neighbors.go), the data waits on
// TX(slot), and the OpReply comes when the resolution ends (StatusNoNeighbor
// if it failed, StatusResolverBusy at once when too many wait).
// A slot's life always ends with the app's OpClose or OpAbort and the
// daemon's OpSlotFree on RX(slot); the daemon reuses an accept slot only
// when RX(slot) is empty, so no stale descriptor can reach the next tenant.
//
// # Data path and buffers
//
// The buffer area is a sealed memfd the daemon creates (ring.NewBufferArea)
// and every app maps; ring.Pool is the ledger. It is not the AF_XDP UMEM:
// the ndp endpoint copies payload into its per-connection send buffer on
// Write and out of its receive buffer on Read, so sharing the UMEM would
// save no copy and would show every app every other app's packets. Per
// message: the app copies into its own partition frames (TX), the daemon
// validates each descriptor (pool.CheckTX: bounds and ownership) and writes
// the bytes to the transport, then returns the frame on the completion
// ring; the daemon reads received bytes into daemon frames, produces them
// on RX(slot) and lends them (pool.Lend); the app copies them out and
// releases them. There is no RTX ring: in the paper the core sends
// straight from the application's buffers, so a retransmission names a
// buffer the application still holds (the core adds NACKed ones, the
// library timed-out ones). Here the ndp endpoint inside the daemon keeps
// the bytes in its send buffer and retransmits them itself (NACK → its RTX
// queue, RTO), so the application has nothing to resubmit.
//
// Backpressure everywhere instead of drops: a full TX ring or an empty
// partition blocks the writer until completions come back; a full send
// buffer in the transport leaves the head TX descriptor in the ring until
// TEWritable; a full RX ring or an empty daemon partition leaves the bytes
// in the transport's receive buffer, whose flow control stops the pulls;
// a full event ring stops the daemon reading that app's commands. Two caps
// keep one stuck socket or app from starving the rest: an app holds at
// most Config.MaxLentPerApp daemon frames (past it its bytes wait in the
// transport), and a socket at most 1/8 of its app's partition in flight
// (the client counts per slot; completions carry the slot).
//
// # Waiting and sleeping
//
// Each core iteration takes the applications' commands and data first,
// then polls the transport once (receive; transmit what they wrote), then
// gives each application what it gets. An iteration that woke an
// application yields the CPU once, and when the applications gave it
// nothing to send its poll deferred the ACKs of what it received to the
// next poll: an application on the core's CPU runs with its bytes first,
// and its answer leaves with the ACK in one transmit kick (one sendto per
// RPC and side instead of two).
//
// The core polls adaptively: it spins (Config.SpinFor, 50us, yielding the
// CPU between idle polls; the window doubles up to MaxSpinFor, 1ms, while
// sleeps are cut short by input and halves back once the core idles) after
// its last useful work, then sleeps on every
// region's WakeDaemon eventfd at once plus a doorbell for control requests
// (and finished neighbour resolutions) and the transport's descriptor, until
// the transport's next deadline (engine.Stack.NextDeadline: timer, paced
// PULL, pacer retry), at most MaxSleep (wait_linux.go).
//
// The application has no poller goroutine: a goroutine that waits (Read, Accept, Write out of frames, a Listen reply) polls the
// rings itself under pollMu and, once it would sleep, either becomes the
// one designated sleeper on the region's WakeApp eventfd or parks on its
// own channel, which whoever polls signals (clientwait_linux.go). So the
// bytes a reader waits for reach it without a thread handoff inside the
// application, the run-to-completion shape the embedded engine has.
//
// The core wakes a sleeping application only for what it waits on. The
// app's sleep word counts its sleeper (low half) and its writers out of TX
// frames (high half); after each iteration the core writes the app's eventfd
// when it produced data or an end of stream on an RX ring, an accepted
// connection, or a reply somebody waits for (a failed dial included), and
// for returned TX frames only while a writer waits for frames, once half a
// socket's in-flight cap has come back since the last such wakeup or the
// core holds none of the app's frames any more (a transport whose send
// buffer is full takes a few frames per iteration; a writer woken for each
// few would write only those). A
// successful dial's reply, completions nobody waits for and OpSlotFree are
// taken on the app's next poll. An end of stream found with the last data
// goes out in the same batch, so a reader is woken once for both. On two
// CPUs this is one application wakeup per RPC and side instead of about
// five (docs/latency.md, "Through ndpd").
//
// # Several queues
//
// A daemon serving n interface queues runs n Cores, each over its own
// Transport (one engine Stack on one AF_XDP socket and UMEM), with its own
// buffer area, pool and sessions, each Run on its own locked OS thread
// (RunCores). One Server fronts them all: "ATTACH i" attaches the caller
// to the i-th core, over a control connection of its own, so an
// application attached to every queue (AttachQueues; sockapi does) holds n
// independent Clients, and every ring above has one producer and one
// consumer per queue as before. A connection lives on the queue its frames
// arrive on: accepted ones where their first frame came in, dialed ones
// where the Server's Placement puts them. RunCores makes the queues share
// fate: a core loop that panics, exits or stalls stops every core, and the
// caller closes the Server, so every application sees ErrDaemonGone.
//
// # Death and shutdown
//
// An application's death closes its control connection; the server calls
// Core.Detach, and the core aborts the app's connections, unlistens its
// ports, completes frames it held in flight, pool.Reclaim's its partition
// and lent frames, unmaps its region and audits the ledger. A region whose
// ring indices the app corrupted is dropped the same way. On Drain the core
// refuses new apps, dials and listens, unlistens everything, waits for the
// open slots to close (at most DrainTimeout), then reclaims everything;
// the server then closes every control connection, and each client turns
// EOF into ErrDaemonGone for every blocked and later call (the designated
// sleeper is woken through its interrupt eventfd; parked goroutines select
// on the gone channel).
package daemon
