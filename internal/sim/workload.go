package sim

import (
	"errors"
	"fmt"
	"io"

	"github.com/ndpstack/ndpstack/ndp"
)

// Flow is one transfer of Size pattern bytes from host Src to host Dst, started at Start.
type Flow struct {
	ID       uint64
	Src, Dst int
	Size     int64
	Start    ndp.Time
	Opts     ndp.DialOptions // LocalPort is set by the workload

	Sent     int64    // bytes the sender's endpoint accepted
	Received int64    // bytes the receiving app read, each checked with Params.CheckBytes
	Corrupt  bool     // a byte differed from what was sent (or more than Size arrived)
	Done     bool     // the receiver read EOF after Size bytes, or the flow failed
	End      ndp.Time // when Done became true
	Err      error    // why the flow failed, if it did
	// pat caches the pattern bytes [patOff, patOff+len(pat)) of the stream, so a sender
	// whose buffer takes one packet at a time does not regenerate 64 KB per write.
	pat       []byte
	patOff    int64
	sendConn  ndp.Handle
	recvConn  ndp.Handle
	closedOut bool
}

// patternChunk is the most pattern bytes a sender prepares at once.
const patternChunk = 64 << 10

// nextPattern returns the flow's unsent pattern bytes from Sent on (at most
// patternChunk), generating them only when the cache does not hold Sent.
func (f *Flow) nextPattern() []byte {
	if f.Sent >= f.patOff && f.Sent < f.patOff+int64(len(f.pat)) {
		return f.pat[f.Sent-f.patOff:]
	}
	n := min(f.Size-f.Sent, patternChunk)
	if int64(cap(f.pat)) < n {
		f.pat = make([]byte, n)
	}
	f.pat = f.pat[:n]
	fillPattern(f.pat, f.ID, f.Sent)
	f.patOff = f.Sent
	return f.pat
}

// FCT is the flow completion time: from Start until the receiver read EOF.
func (f *Flow) FCT() ndp.Time { return f.End - f.Start }

// Verified reports whether every byte arrived, in order and intact.
func (f *Flow) Verified() bool { return f.Done && f.Err == nil && !f.Corrupt && f.Received == f.Size }

type flowKey struct {
	ip   [4]byte
	port uint16
}

// Workload runs a set of flows over a Network.
type Workload struct {
	st    *Network
	Flows []*Flow
	// OnFinish, when set, is called as each flow finishes or fails.
	OnFinish func(f *Flow)
	port     uint16
	pending  int
	apps     []*hostApp
	scratch  []byte
}

type hostApp struct {
	w       *Workload
	send    map[ndp.Handle]*Flow
	recv    map[ndp.Handle]*Flow
	inbound map[flowKey]*Flow
}

// ServicePort is the NDP port every workload receiver listens on.
const ServicePort = 5000

// NewWorkload installs the flows' applications on the network's hosts and schedules
// their starts.
func NewWorkload(st *Network, flows []*Flow) (*Workload, error) {
	w := &Workload{st: st, Flows: flows, port: ServicePort, scratch: make([]byte, 64<<10)}
	w.apps = make([]*hostApp, len(st.Hosts))
	for i, h := range st.Hosts {
		a := &hostApp{w: w, send: map[ndp.Handle]*Flow{}, recv: map[ndp.Handle]*Flow{}, inbound: map[flowKey]*Flow{}}
		w.apps[i] = a
		h.App = a
	}
	listening := map[int]bool{}
	for i, f := range flows {
		if f.Src == f.Dst || f.Src < 0 || f.Dst < 0 || f.Src >= len(st.Hosts) || f.Dst >= len(st.Hosts) {
			return nil, fmt.Errorf("sim: flow %d: bad hosts %d -> %d", f.ID, f.Src, f.Dst)
		}
		f.Opts.LocalPort = uint16(10000 + i)
		if !listening[f.Dst] {
			if err := st.Hosts[f.Dst].EP.Listen(w.port); err != nil {
				return nil, err
			}
			listening[f.Dst] = true
		}
		w.apps[f.Dst].inbound[flowKey{HostIP(f.Src), f.Opts.LocalPort}] = f
		w.pending++
		st.Sim.At(f.Start, func() { w.start(f) })
	}
	return w, nil
}

// Done reports whether every flow finished or failed.
func (w *Workload) Done() bool { return w.pending == 0 }

func (w *Workload) finish(f *Flow, err error) {
	if f.Done {
		return
	}
	f.Done, f.End, f.Err = true, w.st.Sim.now, err
	w.pending--
	if w.OnFinish != nil {
		w.OnFinish(f)
	}
}

func (w *Workload) start(f *Flow) {
	h := w.st.Hosts[f.Src]
	dst := w.st.Hosts[f.Dst]
	c, err := h.EP.Dial(ndp.Addr{MAC: dst.Addr.MAC, IP: dst.Addr.IP, Port: w.port}, f.Opts, w.st.Sim.now)
	if err != nil {
		w.finish(f, fmt.Errorf("dial: %w", err))
		return
	}
	f.sendConn = c
	w.apps[f.Src].send[c] = f
	w.pump(h, f)
	h.process()
}

// pump writes as much of f as the sender's buffer takes, then FIN.
func (w *Workload) pump(h *Host, f *Flow) {
	now := w.st.Sim.now
	for f.Sent < f.Size {
		b := w.scratch[:min(f.Size-f.Sent, int64(len(w.scratch)))] // ZeroPayload: only the length is read
		if w.st.bytes {
			b = f.nextPattern()
		}
		m, err := h.EP.Write(f.sendConn, b, now)
		f.Sent += int64(m)
		if err != nil {
			w.finish(f, fmt.Errorf("write: %w", err))
			return
		}
		if m < len(b) {
			return // buffer full: Writable resumes
		}
	}
	f.pat = nil // all written
	if !f.closedOut {
		f.closedOut = true
		if err := h.EP.CloseWrite(f.sendConn, now); err != nil {
			w.finish(f, fmt.Errorf("close write: %w", err))
		}
	}
}

func (a *hostApp) Accepted(h *Host, c ndp.Handle, ev ndp.Event) {
	f := a.inbound[flowKey{ev.Remote.IP, ev.Remote.Port}]
	if f == nil {
		h.EP.Abort(c, a.w.st.Sim.now)
		return
	}
	f.recvConn = c
	a.recv[c] = f
}

func (a *hostApp) Readable(h *Host, c ndp.Handle) {
	f := a.recv[c]
	if f == nil {
		return
	}
	w := a.w
	for {
		n, err := h.EP.Read(c, w.scratch)
		if n > 0 {
			if f.Received+int64(n) > f.Size || w.st.bytes && checkPattern(w.scratch[:n], f.ID, f.Received) >= 0 {
				f.Corrupt = true
			}
			f.Received += int64(n)
		}
		if errors.Is(err, io.EOF) {
			if f.Received != f.Size {
				w.finish(f, fmt.Errorf("EOF after %d of %d bytes", f.Received, f.Size))
			} else {
				w.finish(f, nil)
			}
			h.EP.CloseWrite(c, w.st.Sim.now)
			return
		}
		if err != nil {
			w.finish(f, fmt.Errorf("read: %w", err))
			return
		}
		if n == 0 {
			return
		}
	}
}

func (a *hostApp) Writable(h *Host, c ndp.Handle) {
	if f := a.send[c]; f != nil && !f.Done {
		a.w.pump(h, f)
	}
}

func (a *hostApp) Closed(h *Host, c ndp.Handle, err error) {
	if f := a.send[c]; f != nil {
		delete(a.send, c)
		if err != nil {
			a.w.finish(f, fmt.Errorf("sender: %w", err))
		}
	}
	if f := a.recv[c]; f != nil {
		delete(a.recv, c)
		if err != nil {
			a.w.finish(f, fmt.Errorf("receiver: %w", err))
		}
	}
	h.EP.Release(c)
}
