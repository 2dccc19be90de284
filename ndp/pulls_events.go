package ndp

// Events (coalesced per connection) and the receiver's pull accounting.

// PollEvent returns the next event, if any.
func (e *Endpoint) PollEvent() (Event, bool) {
	for {
		ev, ok := e.events.pop()
		if !ok {
			return Event{}, false
		}
		if int(ev.idx) >= len(e.conns) {
			continue
		}
		c := e.conns[ev.idx]
		if c == nil || c.gen != ev.gen || c.released {
			continue
		}
		out := Event{Kind: ev.kind, Handle: c.handle()}
		switch ev.kind {
		case EventPulls:
			if ev.epoch != c.pullEpoch {
				continue
			}
			c.pullEvQueued = false
			if c.pullsPending == 0 {
				continue
			}
			out.Count = c.pullsPending
			c.pullsHanded += c.pullsPending
			c.pullsPending = 0
			out.Priority, out.Size, out.Deadline = c.prio, c.flowSize, c.deadline
		case EventAccepted:
			out.Remote, out.LocalPort = c.remote, c.key.localPort
			out.Priority, out.Size, out.Deadline = c.prio, c.flowSize, c.deadline
		case EventReadable:
			c.evReadable = false
		case EventWritable:
			c.evWritable = false
		case EventClosed:
			out.Err = c.closeErr
		}
		return out, true
	}
}

func (e *Endpoint) notifyReadable(c *conn) {
	if !c.evReadable && !c.released {
		c.evReadable = true
		e.events.push(evEntry{kind: EventReadable, idx: c.idx, gen: c.gen})
	}
}

func (e *Endpoint) notifyWritable(c *conn) {
	if c.writeBlocked && !c.evWritable && !c.released {
		c.writeBlocked = false
		c.evWritable = true
		e.events.push(evEntry{kind: EventWritable, idx: c.idx, gen: c.gen})
	}
}

// ---- pulls (receiver side) ----

// addPulls: n arrivals each want one PULL.
func (e *Endpoint) addPulls(c *conn, n int) {
	if n <= 0 || c.closed {
		return
	}
	c.rcv.owedPulls += n
	e.flushPulls(c)
}

// flushPulls hands owed pulls to the host while the receive buffer has
// room for the data they will elicit (flow control), or while
// retransmissions are owed for holes.
//
// Every pull not yet answered counts against the room: pending (not yet
// handed to the host), handed (in the host's pull queue) and out (released
// as a PULL frame, its DATA not arrived: pullsOut). Without the last, a
// receiver whose PULLs were on their way, or whose pulled DATA was in the
// sender's queue or on the wire, pulled again for the same room, and the
// DATA arrived to a full buffer, was NACKed and sent again (no-buffer NACKs:
// 210-1,249 per 100 MB transfer on veth before).
func (e *Endpoint) flushPulls(c *conn) {
	r := &c.rcv
	if r.owedPulls == 0 || c.closed {
		return
	}
	// Room for new data, but never fewer pulls than holes to refill: a
	// retransmission into a hole needs no new room, and out-of-order data
	// may fill the buffer while the hole blocks the reader.
	allow := max(r.room()/e.mss-c.pullsOut, r.holes()) - c.pullsPending - c.pullsHanded
	k := min(r.owedPulls, allow)
	if k <= 0 {
		return
	}
	r.owedPulls -= k
	c.pullsPending += k
	if !c.pullEvQueued {
		c.pullEvQueued = true
		e.events.push(evEntry{kind: EventPulls, idx: c.idx, gen: c.gen, epoch: c.pullEpoch})
	}
}

// dropPulls forgets pending and owed pulls and tells the host to drop the
// ones it queued (EventDropPulls).
func (e *Endpoint) dropPulls(c *conn) {
	e.releaseAck(c) // no PULL is coming for it to ride in
	e.forgetPulls(c)
}

// forgetPulls is dropPulls without releasing a held ACK.
func (e *Endpoint) forgetPulls(c *conn) {
	c.rcv.owedPulls = 0
	c.pullsPending = 0
	// the sender had nothing more: PULLs it gets now find no data and are
	// spent (schedule), so none of them brings DATA
	c.pullsOut = 0
	c.pullEvQueued = false
	c.pullEpoch++
	if c.pullsHanded > 0 {
		c.pullsHanded = 0
		if !c.released {
			e.events.push(evEntry{kind: EventDropPulls, idx: c.idx, gen: c.gen})
		}
	}
}

// PullReleased: the host pull queue released one PULL for h; a PULL frame
// carrying the next pull counter value is queued for transmission.
func (e *Endpoint) PullReleased(h Handle, now Time) {
	e.now = max(e.now, now)
	c := e.conn(h)
	if c == nil || c.closed {
		return
	}
	if c.pullsHanded > 0 {
		c.pullsHanded--
	}
	c.rcv.pullCounter++
	c.pullsOut++
	e.queueCtl(c, TypePull, 0, c.rcv.pullCounter, uint16(c.rcv.pullCounter)%uint16(e.cfg.Paths), 0)
	e.flushPulls(c)
}
