package daemon

import (
	"errors"
	"io"
	"time"

	"github.com/ndpstack/ndpstack/ndp"
	"github.com/ndpstack/ndpstack/ring"
)

// sockState is the daemon's view of one socket slot of one application.
type sockState uint8

const (
	sockFree    sockState = iota // unused (dial slot: the app may connect it; accept slot: on the free list)
	sockBound                    // bound to a transport connection
	sockFailed                   // connect failed; TX is discarded until the app closes the slot
	sockFreeing                  // closed; OpSlotFree waits for room on RX(slot)
	sockDialing                  // dial pending (neighbour resolution): TX waits, the OpReply comes with TEDialed
)

// socket is the daemon-private state of one slot. Nothing here is in
// shared memory.
type socket struct {
	state      sockState
	conn       ConnID
	opts       DialOptions // accumulated OpSetOption values for the next OpConnect
	dialCookie uint64      // sockDialing: the OpConnect's cookie, for its deferred OpReply

	// TX: the head descriptor of TX(slot) may be partly written (the
	// transport's send buffer filled up). It stays in the ring (Peek without
	// Release); headChecked says the pool already took its frame into flight.
	headChecked bool
	headFrame   uint32
	headDone    uint16 // bytes of the head descriptor already written
	blocked     bool   // the transport refused bytes; retry on TEWritable

	finReq   bool // OpCloseWrite: CloseWrite once TX is drained
	finDone  bool
	closeReq bool // OpClose: Release once TX is drained, then EvSlotFree

	readable bool   // the transport may have data, EOF or an error for us
	ended    bool   // OpEnd was produced on RX(slot)
	endDue   bool   // OpEnd waits for room on RX(slot)
	endCode  Status // code of the due OpEnd
}

// SessionCounters count what one application did wrong or what was refused
// to it. Read through Status; written by the core goroutine only.
type SessionCounters struct {
	Commands       uint64 // commands executed
	BadCommands    uint64 // unknown opcode, bad slot, bad argument (dropped)
	TXRejected     uint64 // TX descriptors the pool refused (bounds or ownership)
	TXBytes        uint64 // bytes handed to the transport
	RXBytes        uint64 // bytes delivered on RX rings
	AcceptsDropped uint64 // inbound connections aborted: too many waiting for a slot
	RXLentCap      uint64 // RX deliveries deferred: the app holds MaxLentPerApp frames
	AppWakeups     uint64 // eventfd writes that woke the app's sleeping goroutine
}

// session is one attached application: its region, the daemon end of its
// rings, and the daemon-private state of its slots. Owned by the core
// goroutine.
type session struct {
	app    ring.AppID
	region *ring.Region
	end    *ring.DaemonEnd
	sleep  sleepFlag // daemonSleeping word of the region (wait_linux.go)
	wakeFD int       // eventfd the application writes to wake the daemon
	peer   PeerCred

	socks      []socket
	dialSlots  int
	acceptFree []int            // free accept slots (stack)
	acceptQ    []TransportEvent // accepted connections waiting for a slot (bounded)
	ports      []uint16

	backlog   []ring.Desc // events waiting for room on the event ring
	completed []uint32    // frames to hand back on the completion ring (one batch)
	complSlot []uint32    // the slot each completed frame was sent on
	lent      uint32      // daemon frames this app holds (RX rings or its hands)
	// complUnwoken counts the frames returned on the completion ring since
	// the core last woke (or would have woken) the app's writers for
	// frames: a writer out of frames is woken once a batch of them is back
	// (flushCompletions), not for every few the transport takes.
	complUnwoken uint32
	counters     SessionCounters
	attached     time.Time
	wake         wakeReason // what this iteration produced that a sleeping app waits for
	dead         bool       // reclaimed; the core drops it from its list
	onDeath      func()     // closes the app's control connection
}

func newSession(app ring.AppID, region *ring.Region, end *ring.DaemonEnd, peer PeerCred, now time.Time) *session {
	n := len(end.Sockets)
	s := &session{
		app: app, region: region, end: end, peer: peer,
		socks:     make([]socket, n),
		dialSlots: DialSlots(n),
		backlog:   make([]ring.Desc, 0, n+256),
		acceptQ:   make([]TransportEvent, 0, maxAcceptQ),
		completed: make([]uint32, 0, 256),
		complSlot: make([]uint32, 0, 256),
		attached:  now,
	}
	for i := n - 1; i >= s.dialSlots; i-- {
		s.acceptFree = append(s.acceptFree, i)
	}
	return s
}

// event queues a notification for the app: straight onto the event ring
// when the backlog is empty and the ring has room, else onto the backlog
// (bounded: commands are not read while it is non-empty, and accepts and
// slot frees are bounded by the slot count).
func (s *session) event(d ring.Desc) {
	if len(s.backlog) == 0 {
		var one [1]ring.Desc
		one[0] = d
		if n, _ := s.end.Events.Produce(one[:]); n == 1 {
			s.wake |= eventWake(&d)
			return
		}
	}
	s.backlog = append(s.backlog, d)
}

// flushBacklog moves queued events onto the event ring.
func (s *session) flushBacklog() bool {
	if len(s.backlog) == 0 {
		return false
	}
	n, _ := s.end.Events.Produce(s.backlog)
	if n == 0 {
		return false
	}
	for i := range s.backlog[:n] {
		s.wake |= eventWake(&s.backlog[i])
	}
	s.backlog = s.backlog[:copy(s.backlog, s.backlog[n:])]
	return true
}

func (s *session) reply(d *ring.Desc, st Status) {
	s.event(ring.Desc{Frame: ring.NoFrame, Conn: d.Conn, Op: ring.OpReply, Aux: uint64(st), Cookie: d.Cookie})
}

// pollCommands executes up to one batch of commands. Commands are not read
// while replies are backlogged (the app is not consuming events): that is
// the backpressure that keeps the backlog bounded.
func (c *Core) pollCommands(s *session) bool {
	if len(s.backlog) > 0 {
		return false
	}
	n, err := s.end.Cmd.Consume(c.cmdBuf[:])
	if err != nil {
		c.killSession(s, err)
		return true
	}
	for i := 0; i < n; i++ {
		c.command(s, &c.cmdBuf[i])
	}
	return n > 0
}

// command executes one command. Every failure is a reply or a counter;
// nothing here trusts a field the app wrote without checking it.
func (c *Core) command(s *session, d *ring.Desc) {
	s.counters.Commands++
	slot := int(d.Conn)
	switch d.Op {
	case ring.OpConnect:
		if slot >= s.dialSlots || s.socks[slot].state != sockFree {
			s.counters.BadCommands++
			s.reply(d, StatusBadSlot)
			return
		}
		so := &s.socks[slot]
		opts := so.opts
		so.opts = DialOptions{}
		remote, ok := UnpackAddr(d.Aux)
		var st Status
		switch {
		case !ok || !remote.Addr().IsValid() || remote.Port() == 0:
			st = StatusInvalid
		case c.draining:
			st = StatusDraining
		default:
			conn, pending, err := c.tr.Dial(remote, opts)
			st = StatusOf(err)
			if err == nil && pending {
				// The transport resolves the peer's MAC off the core loop;
				// TX(slot) waits, the reply comes with TEDialed.
				*so = socket{state: sockDialing, conn: conn, dialCookie: d.Cookie}
				c.bind(conn, s, slot)
				c.stats.DialsDeferred++
				return
			}
			if err == nil {
				*so = socket{state: sockBound, conn: conn}
				c.bind(conn, s, slot)
			}
		}
		if st != StatusOK {
			*so = socket{state: sockFailed}
		}
		s.reply(d, st)
	case OpSetOption:
		if slot >= s.dialSlots || s.socks[slot].state != sockFree || s.socks[slot].opts.applyOption(d) != nil {
			s.counters.BadCommands++
		}
	case ring.OpListen, OpUnlisten:
		port := uint16(d.Aux)
		if d.Aux == 0 || d.Aux > 0xffff {
			s.counters.BadCommands++
			s.reply(d, StatusInvalid)
			return
		}
		if d.Op == ring.OpListen {
			s.reply(d, c.listen(s, port))
		} else {
			s.reply(d, c.unlisten(s, port))
		}
	case OpCloseWrite, ring.OpClose, OpAbort:
		if slot >= len(s.socks) || s.socks[slot].state == sockFree || s.socks[slot].state == sockFreeing {
			s.counters.BadCommands++
			return
		}
		so := &s.socks[slot]
		switch d.Op {
		case OpCloseWrite:
			so.finReq = true
		case ring.OpClose:
			so.closeReq = true
		case OpAbort:
			if so.state == sockBound || so.state == sockDialing {
				c.unbind(so.conn)
				// Aux: the reset code the peer is told (ClientSock.AbortCode).
				c.tr.Abort(so.conn, ndp.ResetCode(d.Aux))
			}
			so.state = sockFailed
			so.closeReq = true
		}
		// closeReq with nothing left to send finishes in pollTX.
	default:
		s.counters.BadCommands++
	}
}

func (c *Core) listen(s *session, port uint16) Status {
	if c.draining {
		return StatusDraining
	}
	if len(s.ports) >= c.cfg.MaxListensPerApp {
		return StatusTooManyConns
	}
	if _, taken := c.listeners[port]; taken {
		return StatusPortInUse
	}
	if err := c.tr.Listen(port); err != nil {
		return StatusOf(err)
	}
	c.listeners[port] = s
	s.ports = append(s.ports, port)
	return StatusOK
}

func (c *Core) unlisten(s *session, port uint16) Status {
	if c.listeners[port] != s {
		return StatusInvalid
	}
	c.tr.Unlisten(port)
	delete(c.listeners, port)
	for i, p := range s.ports {
		if p == port {
			s.ports = append(s.ports[:i], s.ports[i+1:]...)
			break
		}
	}
	return StatusOK
}

// pollTX hands TX data of every slot to the transport, retires what it
// wrote on the completion ring, and finishes close requests once a slot's
// TX ring is empty.
func (c *Core) pollTX(s *session) bool {
	work := false
	for slot := range s.socks {
		so := &s.socks[slot]
		if so.state == sockFree || so.state == sockFreeing {
			continue
		}
		if so.state != sockDialing && (!so.blocked || so.state != sockBound) {
			if c.txSlot(s, slot, so) {
				work = true
			}
		}
		if so.closeReq && !so.headChecked && !s.end.Sockets[slot].TX.Pending() {
			c.finishClose(s, slot, so)
			work = true
		} else if so.finReq && !so.finDone && so.state == sockBound && !so.headChecked && !s.end.Sockets[slot].TX.Pending() {
			so.finDone = true
			if err := c.tr.CloseWrite(so.conn); err != nil {
				c.endRX(s, so, StatusOf(err))
			}
			work = true
		}
	}
	if len(s.completed) > 0 {
		c.flushCompletions(s, !c.holdsTX(s))
	}
	return work
}

// holdsTX reports whether the core still holds frames of s: a descriptor
// on some TX ring, or a head partly written.
func (c *Core) holdsTX(s *session) bool {
	for slot := range s.socks {
		so := &s.socks[slot]
		if so.state == sockFree || so.state == sockFreeing {
			continue
		}
		if so.headChecked || s.end.Sockets[slot].TX.Pending() {
			return true
		}
	}
	return false
}

// txSlot writes one batch of TX(slot) descriptors. A bound slot writes them
// to its connection; a failed or aborted slot discards them (their frames
// still go back to the app).
func (c *Core) txSlot(s *session, slot int, so *socket) bool {
	tx := s.end.Sockets[slot].TX
	n, err := tx.Peek(c.txBuf[:])
	if err != nil {
		c.killSession(s, err)
		return true
	}
	if n == 0 {
		return false
	}
	done := 0
	for i := 0; i < n; i++ {
		d := &c.txBuf[i]
		if !so.headChecked {
			if err := c.pool.CheckTX(s.app, d); err != nil || d.Op != ring.OpData {
				if err == nil {
					// A non-data descriptor on a TX ring: give the frame back.
					s.completed = append(s.completed, d.Frame)
					s.complSlot = append(s.complSlot, uint32(slot))
				}
				s.counters.TXRejected++
				done++
				continue
			}
			so.headChecked, so.headFrame, so.headDone = true, d.Frame, 0
		}
		if so.state == sockBound {
			data := c.buf.Data(d)[so.headDone:]
			// The app's OpCloseWrite is already read and this is the last
			// descriptor on TX(slot) (the cmd descriptor was published after
			// every data descriptor): the FIN goes with the data, one packet
			// for a short last message instead of two.
			fin := so.finReq && !so.finDone && i == n-1 && n < len(c.txBuf)
			w, err := c.tr.Write(so.conn, data, fin)
			if fin && err == nil && w == len(data) {
				so.finDone = true
			}
			so.headDone += uint16(w)
			s.counters.TXBytes += uint64(w)
			if err != nil {
				// The connection failed: the error reaches the app on RX; the
				// rest of its TX is discarded.
				c.endRX(s, so, StatusOf(err))
				c.unbind(so.conn)
				c.tr.Release(so.conn)
				so.state = sockFailed
			} else if w < len(data) {
				so.blocked = true
				break
			}
		}
		s.completed = append(s.completed, so.headFrame)
		s.complSlot = append(s.complSlot, uint32(slot))
		so.headChecked = false
		done++
		if len(s.completed) == cap(s.completed) {
			c.flushCompletions(s, false)
		}
	}
	tx.Release(done)
	return true
}

// flushCompletions returns written frames to the app: completion ring
// first, then the pool ledger, for exactly the frames produced. The
// completion ring holds a whole partition, so it cannot be short unless the
// app broke the ring; what does not fit is kept for the next iteration.
//
// A writer waiting for frames is woken once writerWakeBatch frames came
// back since its last wakeup, or when drained (the core holds none of the
// app's frames any more, so no more are coming): while the transport's
// send buffer is full, the core writes and returns a few frames per
// iteration as PULLs make room, and a wakeup for each few cost a context
// switch pair for a writer that then wrote only those few.
func (c *Core) flushCompletions(s *session, drained bool) {
	for i, f := range s.completed {
		c.complBuf[i] = ring.Desc{Frame: f, Conn: s.complSlot[i], Op: ring.OpData}
	}
	n, err := s.end.Completions.Produce(c.complBuf[:len(s.completed)])
	if err != nil {
		c.killSession(s, err)
		return
	}
	if n > 0 {
		c.pool.CompleteTX(s.app, s.completed[:n])
		s.complUnwoken += uint32(n)
		if drained || s.complUnwoken >= c.writerWakeBatch {
			s.wake |= wakeWriters
			s.complUnwoken = 0
		}
	}
	s.completed = s.completed[:copy(s.completed, s.completed[n:])]
	s.complSlot = s.complSlot[:copy(s.complSlot, s.complSlot[n:])]
}

// finishClose ends a slot the app closed or aborted: the transport gets the
// connection back (graceful Release; Abort already happened for OpAbort),
// the app gets EvSlotFree, and an accept slot returns to the free list.
func (c *Core) finishClose(s *session, slot int, so *socket) {
	if so.state == sockBound || so.state == sockDialing { // a pending dial: Release cancels it
		c.unbind(so.conn)
		c.tr.Release(so.conn)
	}
	*so = socket{state: sockFreeing}
	c.slotFree(s, slot, so)
}

// slotFree produces the OpSlotFree marker on RX(slot) and frees the slot,
// or leaves it sockFreeing until the ring has room.
func (c *Core) slotFree(s *session, slot int, so *socket) bool {
	d := [1]ring.Desc{{Frame: ring.NoFrame, Conn: uint32(slot), Op: OpSlotFree}}
	if n, _ := s.end.Sockets[slot].RX.Produce(d[:]); n == 0 {
		return false
	}
	*so = socket{} // no wakeup: nobody waits for a slot (Dial polls for one)
	if slot >= s.dialSlots {
		s.acceptFree = append(s.acceptFree, slot)
	}
	return true
}

// endRX arranges the OpEnd descriptor that ends slot's receive stream.
func (c *Core) endRX(s *session, so *socket, st Status) {
	if so.ended || so.endDue {
		return
	}
	so.endDue, so.endCode = true, st
	so.readable = false
}

// pollRX moves received bytes of readable slots from the transport into
// daemon frames lent to the app on RX(slot). A full RX ring or an empty pool
// leaves the slot readable for the next iteration (backpressure reaches the
// peer through the transport's flow control).
func (c *Core) pollRX(s *session) bool {
	work := false
	for slot := range s.socks {
		so := &s.socks[slot]
		if so.state == sockFreeing {
			if c.slotFree(s, slot, so) {
				work = true
			}
			continue
		}
		if so.endDue {
			if c.produceEnd(s, slot, so) {
				work = true
			}
			continue
		}
		if !so.readable || so.state != sockBound || so.ended {
			continue
		}
		if c.rxSlot(s, slot, so) {
			work = true
		}
	}
	return work
}

func (c *Core) rxSlot(s *session, slot int, so *socket) bool {
	rx := s.end.Sockets[slot].RX
	free, err := rx.Free()
	if err != nil {
		c.killSession(s, err)
		return true
	}
	free = min(free, len(c.rxFrames), int(c.cfg.MaxLentPerApp-min(s.lent, c.cfg.MaxLentPerApp)))
	if free == 0 {
		if s.lent >= c.cfg.MaxLentPerApp {
			s.counters.RXLentCap++
		}
		return false
	}
	got := c.pool.Alloc(c.rxFrames[:free])
	if got == 0 {
		c.stats.RXPoolEmpty++
		return false
	}
	k := 0
	for k < got {
		f := c.rxFrames[k]
		n, err := c.tr.Read(so.conn, c.buf.Frame(f))
		if n > 0 {
			c.rxBuf[k] = ring.Desc{Frame: f, Len: uint16(n), Conn: uint32(slot), Op: ring.OpData}
			k++
			s.counters.RXBytes += uint64(n)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				c.endRX(s, so, StatusOK)
			} else {
				c.endRX(s, so, StatusOf(err))
			}
			break
		}
		if n == 0 {
			so.readable = false
			break
		}
	}
	if k > 0 {
		n, _ := rx.Produce(c.rxBuf[:k]) // cannot be short: k <= Free()
		lent, _ := c.pool.Lend(s.app, c.rxFrames[:n])
		s.lent += uint32(lent)
		s.wake |= wakeReaders
	}
	if k < got {
		c.pool.Free(c.rxFrames[k:got])
	}
	if so.endDue {
		// The stream ended with this batch (a FIN with the last data): the
		// reader gets both with one wakeup.
		c.produceEnd(s, slot, so)
	}
	return k > 0 || so.endDue || so.ended
}

// produceEnd puts the OpEnd that ends slot's receive stream on RX(slot), or
// leaves it due while the ring is full.
func (c *Core) produceEnd(s *session, slot int, so *socket) bool {
	d := [1]ring.Desc{{Frame: ring.NoFrame, Conn: uint32(slot), Op: OpEnd, Aux: uint64(so.endCode)}}
	if n, _ := s.end.Sockets[slot].RX.Produce(d[:]); n == 0 {
		return false
	}
	so.endDue, so.ended = false, true
	s.wake |= wakeReaders
	return true
}

// pollReleases takes back RX frames the app has read.
func (c *Core) pollReleases(s *session) bool {
	n, err := s.end.Releases.Consume(c.relBuf[:])
	if err != nil {
		c.killSession(s, err)
		return true
	}
	if n > 0 {
		s.lent -= uint32(c.pool.AcceptReleased(s.app, c.relBuf[:n]))
	}
	return n > 0
}

// accept binds an inbound connection to a free accept slot of the
// listening app, or aborts it when there is none.
func (c *Core) accept(ev *TransportEvent) {
	s := c.listeners[ev.LocalPort]
	if s == nil && len(c.listeners) == 1 && ev.LocalPort == 0 {
		// A transport that cannot say which port (see docs/decisions.md):
		// with a single listener there is no ambiguity.
		for _, only := range c.listeners {
			s = only
		}
	}
	if s == nil {
		c.stats.AcceptsUnrouted++
		c.tr.Abort(ev.Conn, ndp.ResetAbort)
		return
	}
	if len(s.acceptQ) > 0 || !c.bindAccept(s, ev) {
		// Every accept slot is busy or still being handed back by the app
		// (OpSlotFree not consumed yet): hold the connection, its data
		// waits in the transport, and bind it when a slot frees.
		if len(s.acceptQ) == cap(s.acceptQ) {
			s.counters.AcceptsDropped++
			c.tr.Abort(ev.Conn, ndp.ResetAbort)
			return
		}
		s.acceptQ = append(s.acceptQ, *ev)
	}
}

// maxAcceptQ bounds the connections one app may have accepted but not yet
// bound to a slot.
const maxAcceptQ = 256

// retryAccepts binds held connections to slots that became free.
func (c *Core) retryAccepts(s *session) bool {
	n := 0
	for n < len(s.acceptQ) && c.bindAccept(s, &s.acceptQ[n]) {
		n++
	}
	if n > 0 {
		s.acceptQ = s.acceptQ[:copy(s.acceptQ, s.acceptQ[n:])]
	}
	return n > 0
}

// bindAccept binds ev's connection to a free accept slot whose RX ring the
// app has emptied (so no stale descriptor reaches the new tenant) and
// tells the app. false: no such slot.
func (c *Core) bindAccept(s *session, ev *TransportEvent) bool {
	slot := -1
	for i := len(s.acceptFree) - 1; i >= 0; i-- {
		cand := s.acceptFree[i]
		if free, err := s.end.Sockets[cand].RX.Free(); err == nil && free == int(s.end.Sockets[cand].RX.Spec().Slots) {
			slot = cand
			s.acceptFree = append(s.acceptFree[:i], s.acceptFree[i+1:]...)
			break
		}
	}
	if slot < 0 {
		return false
	}
	s.socks[slot] = socket{state: sockBound, conn: ev.Conn, readable: true}
	c.bind(ev.Conn, s, slot)
	aux, _ := PackAddr(ev.Remote)
	s.event(ring.Desc{Frame: ring.NoFrame, Conn: uint32(slot), Op: EvAccepted, Aux: aux, Cookie: uint64(ev.LocalPort), Flags: uint16(ev.Priority)})
	return true
}
