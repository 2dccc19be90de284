package sim

import (
	"github.com/ndpstack/ndpstack/ndp"
	"github.com/ndpstack/ndpstack/pullpacer"
)

// App is the workload side of a host: callbacks for the endpoint's events.
type App interface {
	// Accepted: a new inbound connection.
	Accepted(h *Host, c ndp.Handle, ev ndp.Event)
	// Readable: c has bytes (or EOF) to read.
	Readable(h *Host, c ndp.Handle)
	// Writable: c's send buffer has room again.
	Writable(h *Host, c ndp.Handle)
	// Closed: c is finished; err is nil for a clean close.
	Closed(h *Host, c ndp.Handle, err error)
}

// HostStats counts a host's frames the endpoint refused.
type HostStats struct {
	FrameErrors uint64 // frames HandleFrame rejected (malformed, bad checksum, unknown)
	Quenched    uint64 // connections the pull queue quenched
}

// Host is a simulated end host: a real ndp.Endpoint and pull queue behind one NIC.
type Host struct {
	sim   *Sim
	Index int
	Addr  ndp.Addr
	EP    *ndp.Endpoint
	Pulls *pullpacer.PullQueue
	NIC   *Link
	App   App
	Stats HostStats

	timerAt   ndp.Time // when the pending endpoint timer event fires (0 = none)
	pullAt    ndp.Time // when the pending pull release event fires (0 = none)
	inProcess bool
}

func (h *Host) receive(f []byte) {
	if err := h.EP.HandleFrame(f, h.sim.now); err != nil {
		h.Stats.FrameErrors++
	}
	h.sim.putBuf(f)
	if b, from := h.EP.TakeUnpulledBytes(); b > 0 {
		h.Pulls.Charge(h.sim.now, b, from)
	}
	if short := h.EP.TakePullShortfall(); short > 0 {
		h.Pulls.Refund(h.sim.now, short)
	}
	h.process()
}

// nextFrame is the NIC link's source.
func (h *Host) nextFrame(now ndp.Time) ([]byte, bool) {
	b := h.sim.getBuf()
	n, _ := h.EP.PollFrame(b, now, true)
	if n == 0 {
		h.sim.putBuf(b)
		return nil, false
	}
	// Sending DATA arms the endpoint's retransmission timer: without this, a packet
	// whose ACK never comes (a failed link) and no later arrival at this host left the
	// RTO unscheduled and the connection silent forever.
	h.armTimer()
	return b[:n], true
}

// process drains the endpoint's events into the pull queue and the app, then makes sure
// the NIC, the pull queue and the endpoint's timers have their next events scheduled.
// Call it after anything that may have changed the endpoint.
func (h *Host) process() {
	if h.inProcess {
		return // an App callback re-entered; the outer loop picks the work up
	}
	h.inProcess = true
	now := h.sim.now
	for {
		ev, ok := h.EP.PollEvent()
		if !ok {
			break
		}
		switch ev.Kind {
		case ndp.EventAccepted:
			if ev.Size > 0 || ev.Deadline > 0 || ev.Priority > 0 {
				h.Pulls.SetFlow(ev.Handle, pullpacer.Flow{Priority: ev.Priority, Size: ev.Size, Deadline: ev.Deadline}, now)
			}
			if h.App != nil {
				h.App.Accepted(h, ev.Handle, ev)
			}
		case ndp.EventPulls:
			if h.Pulls.Config().Policy == pullpacer.PolicyDeadline {
				// D3 allocates by remaining size: tell the queue what arrived
				// before it queues the pulls.
				if n, ok := h.EP.Received(ev.Handle); ok {
					h.Pulls.Progress(ev.Handle, int64(n))
				}
			}
			h.Pulls.Add(ev.Handle, ev.Count)
		case ndp.EventDropPulls:
			h.Pulls.Drop(ev.Handle)
		case ndp.EventReadable:
			if h.App != nil {
				h.App.Readable(h, ev.Handle)
			}
		case ndp.EventWritable:
			if h.App != nil {
				h.App.Writable(h, ev.Handle)
			}
		case ndp.EventClosed:
			h.Pulls.Remove(ev.Handle)
			if h.App != nil {
				h.App.Closed(h, ev.Handle, ev.Err)
			}
		}
	}
	for {
		c, ok := h.Pulls.PollQuenched()
		if !ok {
			break
		}
		h.Stats.Quenched++
		h.EP.Quench(c, now)
	}
	h.inProcess = false
	h.schedule()
}

// schedule arms the pull release and endpoint timer events and kicks the NIC.
func (h *Host) schedule() {
	now := h.sim.now
	if at, ok := h.Pulls.NextAt(); ok && (h.pullAt == 0 || at < h.pullAt) {
		if at < now {
			at = now
		}
		h.pullAt = at
		h.sim.push(at, evBody{kind: evPulls, host: h})
	}
	h.armTimer()
	h.NIC.kick()
}

// armTimer schedules the endpoint's next timer if it is earlier than the pending one.
func (h *Host) armTimer() {
	if at, ok := h.EP.NextTimer(); ok && (h.timerAt == 0 || at < h.timerAt) {
		if now := h.sim.now; at < now {
			at = now
		}
		h.timerAt = at
		h.sim.push(at, evBody{kind: evTimers, host: h})
	}
}

func (h *Host) releasePulls(at ndp.Time) {
	if h.pullAt != at {
		return // superseded by an earlier release event
	}
	h.pullAt = 0
	now := h.sim.now
	for {
		c, ok := h.Pulls.Next(now)
		if !ok {
			break
		}
		h.EP.PullReleased(c, now)
	}
	h.process()
}

func (h *Host) fireTimers(at ndp.Time) {
	if h.timerAt != at {
		return
	}
	h.timerAt = 0
	h.EP.HandleTimers(h.sim.now)
	h.process()
}
