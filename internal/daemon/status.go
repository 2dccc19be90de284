package daemon

import (
	"time"

	"github.com/ndpstack/ndpstack/internal/engine"

	"github.com/ndpstack/ndpstack/ring"
)

// PeerCred is an application's credentials as the kernel reported them on
// the control socket (SO_PEERCRED).
type PeerCred struct {
	PID int32  `json:"pid"`
	UID uint32 `json:"uid"`
	GID uint32 `json:"gid"`
}

// Snapshot is the operator's view of a running core: what `ndpd status`
// prints. It is plain data (JSON-encodable).
type Snapshot struct {
	// Queue is the interface queue of the core this snapshot describes.
	Queue    int            `json:"queue"`
	Uptime   time.Duration  `json:"uptime_ns"`
	Draining bool           `json:"draining"`
	Pool     ring.PoolStats `json:"pool"`
	// PoolRejects are the pool's counters of refused descriptors.
	PoolRejects PoolRejects `json:"pool_rejects"`
	// PoolAudit is "" when the pool ledger is consistent, else the first
	// inconsistency (a daemon bug).
	PoolAudit string      `json:"pool_audit"`
	Core      CoreStats   `json:"core"`
	Apps      []AppStatus `json:"apps"`
	Listening []uint16    `json:"listening"`
	// Engine is the network stack's counters (protocol, pull queue, AF_XDP
	// socket) when the transport is an engine stack: retransmissions,
	// frames refused as malformed or hostile, kernel drops.
	Engine *engine.Stats `json:"engine,omitempty"`
	// Queues, from a daemon serving several queues, are every queue's
	// snapshot in the order the daemon serves them (the fields above are
	// the first queue's). Empty with one queue.
	Queues []Snapshot `json:"queues,omitempty"`
}

// engineStatser is implemented by transports backed by an engine.Stack.
type engineStatser interface{ EngineStats() engine.Stats }

// PoolRejects mirrors ring.PoolCounters as plain numbers.
type PoolRejects struct {
	Range, NotOwned, Length, Stale, DoubleFree uint64
}

// AppStatus is one attached application.
type AppStatus struct {
	App         uint32          `json:"app"`
	Peer        PeerCred        `json:"peer"`
	Attached    time.Time       `json:"attached"`
	OpenSockets int             `json:"open_sockets"`
	HeldAccepts int             `json:"held_accepts"` // accepted, waiting for a free slot
	Lent        uint32          `json:"lent"`         // daemon frames it holds (RX)
	Listening   []uint16        `json:"listening"`
	Counters    SessionCounters `json:"counters"`
	Rings       RingOccupancy   `json:"rings"`
}

// RingOccupancy is how many descriptors wait in an application's rings
// (summed over its sockets for the per-socket rings): toward the daemon
// (Cmd, Releases, TX) and toward the application (Events, Completions, RX).
type RingOccupancy struct {
	Cmd, Releases, TX       int
	Events, Completions, RX int
}

// status builds a snapshot (core goroutine; O(frames) for the audit, which
// is fine at an operator's pace; a metrics scrape skips it).
func (c *Core) status(now time.Time, audit bool) Snapshot {
	pc := c.pool.Counters()
	snap := Snapshot{
		Queue:    c.cfg.Queue,
		Uptime:   now.Sub(c.started),
		Draining: c.draining,
		Pool:     c.pool.Stats(),
		PoolRejects: PoolRejects{
			Range: pc.RejectedRange.Load(), NotOwned: pc.RejectedNotOwned.Load(), Length: pc.RejectedLength.Load(),
			Stale: pc.RejectedStale.Load(), DoubleFree: pc.DoubleFree.Load(),
		},
		Core: c.stats,
		Apps: make([]AppStatus, 0, len(c.sessions)),
	}
	if audit {
		if err := c.pool.Audit(); err != nil {
			snap.PoolAudit = err.Error()
		}
	}
	if es, ok := c.tr.(engineStatser); ok {
		st := es.EngineStats()
		snap.Engine = &st
	}
	for port := range c.listeners {
		snap.Listening = append(snap.Listening, port)
	}
	for _, s := range c.sessions {
		open := 0
		for i := range s.socks {
			if s.socks[i].state != sockFree {
				open++
			}
		}
		snap.Apps = append(snap.Apps, AppStatus{
			App: uint32(s.app), Peer: s.peer, Attached: s.attached, OpenSockets: open, HeldAccepts: len(s.acceptQ), Lent: s.lent,
			Listening: append([]uint16(nil), s.ports...), Counters: s.counters, Rings: s.rings(),
		})
	}
	return snap
}

// rings reads the occupancy of every ring of s (core goroutine: it owns
// the daemon ends; a corrupt ring reads as empty, its session is being
// killed).
func (s *session) rings() RingOccupancy {
	var r RingOccupancy
	e := s.end
	r.Cmd, _ = e.Cmd.Available()
	r.Releases, _ = e.Releases.Available()
	r.Events, _ = e.Events.Queued()
	r.Completions, _ = e.Completions.Queued()
	for i := range e.Sockets {
		if s.socks[i].state == sockFree {
			continue
		}
		tx, _ := e.Sockets[i].TX.Available()
		rx, _ := e.Sockets[i].RX.Queued()
		r.TX += tx
		r.RX += rx
	}
	return r
}
