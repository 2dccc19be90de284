// Package ring is the shared-memory interface between the NDP core process
// (ndpd) and each application: single-producer/single-consumer descriptor
// rings in a versioned shared region, the buffer pool's ownership ledger,
// eventfd wakeups, and the Unix-socket handoff of the memory. It is the
// "communications ring buffer ... RX, TX and RTX ... and a shared buffer
// pool" of the NDP paper's Linux implementation (section 4), built for real
// separate processes, without the RTX ring: retransmission is done by the
// NDP endpoint inside ndpd, which keeps the bytes in its send buffer, so
// the application has nothing to resubmit (internal/daemon/doc.go).
//
// # What lives where
//
//	      application process                       ndpd (core loop goroutine)
//	┌───────────────────────────┐  region memfd   ┌──────────────────────────────┐
//	│ AppEnd                    │ (sealed, one    │ DaemonEnd                    │
//	│  Cmd         Producer ────┼─ per app) ─────▶│  Cmd         Consumer        │
//	│  Events      Consumer ◀───┼─────────────────┤  Events      Producer        │
//	│  Completions Consumer ◀───┼── TX frames back┤  Completions Producer        │
//	│  Releases    Producer ────┼── RX frames back▶  Releases    Consumer        │
//	│  Sockets[s].TX  Producer ─┼────────────────▶│  Sockets[s].TX  Consumer     │
//	│  Sockets[s].RX  Consumer ◀┼─────────────────┤  Sockets[s].RX  Producer     │
//	│  FrameStack (own TX part.)│                 │  Pool (ledger, private mem)  │
//	└─────────────┬─────────────┘                 └──────────────┬───────────────┘
//	              └──────── buffer area memfd (the afxdp UMEM) ──┘
//	               frames [0, DaemonFrames): daemon partition (RX, lent to apps)
//	               then one TX partition of AppFrames frames per application
//
// # Setting up (daemon)
//
//  1. pool, _ := NewPool(PoolConfig{Frames, FrameSize, DaemonFrames, AppFrames})
//     over the UMEM (afxdp's memfd, sealed with SealSize; or NewBufferArea).
//  2. When an application connects on the control socket:
//     app, part, err := pool.AttachApp() (ErrNoPartition = refuse it);
//     region, _ := CreateRegion(RegionConfig{}, app, BufferGeometry{FrameSize, Frames, part});
//     SendAttachment(conn, region.Attachment(umemFD)); end, _ := region.DaemonEnd().
//  3. The core loop polls every end's input rings in batches:
//     Cmd/TX/Releases with Consume(batch), validating every descriptor
//     before use: pool.AcceptTX or CheckTX (bounds + ownership, compacts the
//     batch in place; rejects are counted in pool.Counters()) and
//     pool.AcceptReleased. It delivers RX with Sockets[s].RX.Produce then
//     pool.Lend(app, produced frames), and returns sent frames with
//     Completions.Produce then pool.CompleteTX(app, produced frames). After
//     each batch, end.Notifier.Notify() (one atomic load; a syscall only if
//     the application sleeps). With nothing to do it sleeps with
//     end.Waiter.Wait(pending, timeout), or, serving many applications, puts
//     every end's Waiter (and its XSK descriptor) in one WaitSet.
//  4. When the control connection closes (the application died, even by
//     SIGKILL): region.Close() and pool.Reclaim(app). Lent RX frames go back
//     to the free list at once; frames the daemon still has in flight come
//     back through CompleteTX, after which the partition is reusable and
//     pool.Stats() equals its initial value. pool.Audit() checks the ledger.
//
// # Setting up (application)
//
//	att, _ := RecvAttachment(conn)
//	region, err := OpenRegion(att)   // validates magic, version, CRC, ring table
//	l := region.Layout()
//	buf, _ := MapBufferArea(att.Buffer, l.BufferFrames, l.FrameSize)
//	end, _ := region.AppEnd()
//	frames := NewFrameStack(l.Part)
//
// To send: frames.Pop, fill buf.Frame(f), Sockets[s].TX.Produce, Notify.
// Frames come back on Completions (frames.PushDescs). To receive:
// Sockets[s].RX.Consume, read buf.Data(&d), then Releases.Produce the same
// frames.
//
// # Rules every ring follows
//
// One producer goroutine in one process and one consumer goroutine in the
// other (never two writers of one index). Power-of-two slots, free-running
// indices, each index word on its own 128-byte line, positions cached so
// the shared words are touched once per batch. The memory ordering and the
// checks against a hostile peer are written down at the top of ring.go; the
// wakeup protocol and its lost-wakeup argument at the top of wake_linux.go;
// the byte layout in layout.go. Full rings and empty pools are short counts,
// bad input is a sentinel error plus a counter; nothing here panics on
// anything the peer can write.
package ring
