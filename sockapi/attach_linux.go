package sockapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ndpstack/ndpstack/internal/daemon"
	"github.com/ndpstack/ndpstack/internal/engine"
	"github.com/ndpstack/ndpstack/ndp"
)

// Attach connects to the ndpd daemon listening on the Unix control socket
// socketPath with the default AttachConfig; AttachWith describes it.
func Attach(socketPath string) (*Stack, error) {
	return AttachWith(socketPath, AttachConfig{})
}

// AttachWith connects to the ndpd daemon listening on the Unix control
// socket socketPath and returns a Stack backed by it: the same API as Open,
// with the NDP work done in ndpd and data moving through shared-memory
// rings (internal/daemon describes them). cfg says how the application's
// goroutines wait for the rings. When ndpd stops or dies under a running
// application, every blocked and later call returns ErrDaemonGone.
//
// AttachWith fails with ErrInvalidConfig for a bad cfg, and if the daemon
// refuses the caller's uid/gid (the error mentions "not allowed"), is
// draining, or has no free buffer partition.
func AttachWith(socketPath string, cfg AttachConfig) (*Stack, error) {
	ccfg, err := cfg.clientConfig(runtime.NumCPU())
	if err != nil {
		return nil, err
	}
	cs, err := daemon.AttachQueues(socketPath, ccfg)
	if err != nil {
		return nil, fmt.Errorf("sockapi: attach: %w", err)
	}
	return newStack(&attached{cs: cs, path: socketPath, epoch: time.Now()}), nil
}

// AttachConfig says how an attached application waits for its rings. The
// zero value is valid and fits the machine it runs on.
//
// Each hop between an application and ndpd is a ring write and, when the
// other side sleeps, an eventfd wakeup (tens of µs on a VM). An application
// that polls its rings takes the hop without the wakeup, at the price of a
// CPU while it waits: right on a server with spare cores, wrong where the
// application and ndpd share two CPUs (the spinning thread takes the CPU the
// daemon needs to answer).
type AttachConfig struct {
	// PollMode: PollAdaptive (the zero value) polls for Spin, then sleeps on
	// the rings' eventfd; PollBusy polls until the call can complete or its
	// deadline passes, never sleeping: lowest latency, one CPU per waiting
	// goroutine.
	PollMode PollMode
	// Spin is how long adaptive waiters poll before sleeping. Zero picks by
	// the CPU count: 50µs with 4 or more CPUs (spare cores for the
	// application and ndpd), none below. Negative: never poll, sleep at once.
	// Ignored with PollBusy.
	Spin time.Duration
}

// spareCPUs is the CPU count from which an adaptive attached application
// polls by default.
const spareCPUs = 4

// clientConfig maps cfg onto the daemon client's, for a machine of ncpu CPUs.
func (c AttachConfig) clientConfig(ncpu int) (daemon.ClientConfig, error) {
	switch c.PollMode {
	case PollBusy:
		return daemon.ClientConfig{SpinFor: daemon.SpinForever}, nil
	case PollAdaptive:
		spin := c.Spin
		if spin == 0 {
			spin = -1
			if ncpu >= spareCPUs {
				spin = 50 * time.Microsecond
			}
		}
		return daemon.ClientConfig{SpinFor: spin}, nil
	}
	return daemon.ClientConfig{}, fmt.Errorf("%w: PollMode %d", ErrInvalidConfig, c.PollMode)
}

// attached is the backend of an attached Stack: one daemon.Client per
// queue the daemon serves (each queue's core loop serves the application
// through its own region). A connection lives on the queue its frames
// arrive on: an accepted one on the queue its first frame came in on (the
// listener listens on every queue), a dialed one on queueFor(remote).
type attached struct {
	cs    []*daemon.Client
	dials atomic.Uint32 // dials placed (PlaceSpread's round robin)
	path  string        // control socket, for status queries
	epoch time.Time     // origin of now()
}

// queueFor is the index of the queue a dial to ip goes through, as the
// daemon asks (daemon.Placement): where the NIC's Toeplitz RSS, hashing
// addresses only, delivers the peer's frames (rss), spread round-robin
// (veth: a frame sent on TX queue k arrives on the peer's RX queue k, and
// the peer answers on its queue k), or by a hash of the peer's address
// (every connection to one peer on one queue; also rss's fallback).
func (a *attached) queueFor(ip netip.Addr) int {
	n := uint32(len(a.cs))
	if n == 1 {
		return 0
	}
	switch a.cs[0].Placement() {
	case daemon.PlaceSpread:
		return int(a.dials.Add(1) % n)
	case daemon.PlaceRSS:
		if r := a.cs[0].RSS(); r != nil {
			if i, ok := r.Index(ip, a.cs[0].LocalAddr()); ok && i < int(n) {
				return i
			}
		}
	}
	b := ip.Unmap().As4()
	h := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	h ^= h >> 16
	h *= 0x45d9f3b
	h ^= h >> 16
	return int(h % n)
}

// attachedErr maps the daemon client's errors onto the backend contract.
func attachedErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, daemon.ErrDaemonGone):
		return ErrDaemonGone
	case errors.Is(err, daemon.ErrClientClosed):
		return ErrStackClosed
	case errors.Is(err, daemon.ErrCanceled):
		return os.ErrDeadlineExceeded
	case errors.Is(err, daemon.ErrDraining):
		return fmt.Errorf("%w: %w", ErrDaemonGone, err)
	case errors.Is(err, daemon.ErrNoSlot):
		return fmt.Errorf("%w: %w", ErrTooManyConns, err)
	case errors.Is(err, daemon.ErrResolverBusy):
		return fmt.Errorf("%w: %w", ErrResolverBusy, err)
	}
	return err
}

func (a *attached) dial(ctx context.Context, ip netip.Addr, port uint16, o dialOptions) (backendConn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	opts := daemon.DialOptions{Size: o.size, Priority: o.priority, Paced: o.paced}
	if o.deadline > 0 {
		// o.deadline is on this backend's clock (now); the daemon takes it
		// relative to the moment it reads the command.
		opts.Deadline = max(time.Duration(o.deadline-a.now()), 1)
	}
	s, err := a.cs[a.queueFor(ip)].Dial(netip.AddrPortFrom(ip, port), opts)
	if err != nil {
		return nil, attachedErr(err)
	}
	return attachedConn{s}, nil
}

func (a *attached) listen(port uint16, _ int) (backendListener, error) {
	ls := make([]*daemon.ClientListener, 0, len(a.cs))
	for _, c := range a.cs {
		l, err := c.Listen(port)
		if err != nil {
			for _, l := range ls {
				l.Close()
			}
			return nil, attachedErr(err)
		}
		ls = append(ls, l)
	}
	if len(ls) == 1 {
		return attachedListener{ls[0]}, nil
	}
	return newQueuesListener(ls), nil
}

func (a *attached) localAddr() netip.Addr { return a.cs[0].LocalAddr() }
func (a *attached) now() int64            { return int64(time.Since(a.epoch)) }
func (a *attached) stats() (Stats, error) {
	st, err := a.engineStats()
	if err != nil {
		return Stats{}, err
	}
	return statsFromEngine(st), nil
}

// poll: ndpd's core loop drives an attached stack.
func (a *attached) poll() bool { return false }

func (a *attached) engineStats() (engine.Stats, error) {
	snap, err := daemon.QueryStatus(a.path)
	if err != nil {
		return engine.Stats{}, fmt.Errorf("sockapi: ndpd status: %w", attachedErr(err))
	}
	if snap.Engine == nil {
		return engine.Stats{}, ErrStatsUnavailable
	}
	st := *snap.Engine
	for _, q := range snap.Queues[min(1, len(snap.Queues)):] {
		if q.Engine != nil {
			addCounters(reflect.ValueOf(&st).Elem(), reflect.ValueOf(q.Engine).Elem())
		}
	}
	return st, nil
}

// addCounters adds src's integer counters (and arrays of them) into dst,
// field by field, for the stats of several queues: durations (estimates,
// bounds) keep dst's, the first queue's.
func addCounters(dst, src reflect.Value) {
	switch {
	case dst.Type() == reflect.TypeFor[time.Duration]():
	case dst.Kind() == reflect.Struct:
		for i := range dst.NumField() {
			if dst.Type().Field(i).IsExported() {
				addCounters(dst.Field(i), src.Field(i))
			}
		}
	case dst.Kind() == reflect.Array:
		for i := range dst.Len() {
			addCounters(dst.Index(i), src.Index(i))
		}
	case dst.CanUint():
		dst.SetUint(dst.Uint() + src.Uint())
	case dst.CanInt():
		dst.SetInt(dst.Int() + src.Int())
	}
}

func (a *attached) close() error {
	var first error
	for _, c := range a.cs {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	return attachedErr(first)
}

type attachedConn struct{ s *daemon.ClientSock }

func (c attachedConn) read(p []byte, _ int, cancel <-chan struct{}) (int, error) {
	n, err := c.s.Read(p, time.Time{}, cancel)
	return n, attachedErr(err)
}

func (c attachedConn) write(p []byte, closeWrite bool, cancel <-chan struct{}) (int, error) {
	n, err := c.s.Write(p, time.Time{}, cancel)
	if err == nil && closeWrite {
		err = c.s.CloseWrite()
	}
	return n, attachedErr(err)
}

func (c attachedConn) closeWrite() error { return attachedErr(c.s.CloseWrite()) }
func (c attachedConn) close() error      { return attachedErr(c.s.Close()) }
func (c attachedConn) abort() error      { return attachedErr(c.s.Abort()) }
func (c attachedConn) closeReuse() error { return c.close() }
func (c attachedConn) abortTooLarge() error {
	return attachedErr(c.s.AbortCode(ndp.ResetTooLarge))
}
func (c attachedConn) remote() (netip.Addr, uint16) {
	r := c.s.Remote()
	return r.Addr(), r.Port()
}
func (c attachedConn) localPort() uint16 { return c.s.LocalPort() }

type attachedListener struct{ l *daemon.ClientListener }

func (l attachedListener) accept(cancel <-chan struct{}) (backendConn, error) {
	s, err := l.l.Accept(time.Time{}, cancel)
	if err != nil {
		return nil, attachedErr(err)
	}
	return attachedConn{s}, nil
}

func (l attachedListener) close() error { return attachedErr(l.l.Close()) }
func (l attachedListener) port() uint16 { return l.l.Port() }

// queuesListener is a listener on every queue of the daemon: one goroutine
// per queue accepts there and hands the connection over (one hop a
// connection; with one queue the listener is accepted from directly).
type queuesListener struct {
	ls       []*daemon.ClientListener
	accepted chan acceptedConn
	quit     chan struct{}
	once     sync.Once
	wg       sync.WaitGroup
}

type acceptedConn struct {
	s   *daemon.ClientSock
	err error
}

func newQueuesListener(ls []*daemon.ClientListener) *queuesListener {
	q := &queuesListener{ls: ls, accepted: make(chan acceptedConn, len(ls)), quit: make(chan struct{})}
	for _, l := range ls {
		q.wg.Add(1)
		go q.acceptFrom(l)
	}
	return q
}

// acceptFrom accepts on one queue's listener until it fails (its error is
// handed over too: the listener closed, the daemon gone) or close.
func (q *queuesListener) acceptFrom(l *daemon.ClientListener) {
	defer q.wg.Done()
	for {
		s, err := l.Accept(time.Time{}, q.quit)
		select {
		case q.accepted <- acceptedConn{s, err}:
		case <-q.quit:
			if s != nil {
				s.Abort()
			}
			return
		}
		if err != nil {
			return
		}
	}
}

func (q *queuesListener) accept(cancel <-chan struct{}) (backendConn, error) {
	select {
	case a := <-q.accepted:
		if a.err != nil {
			return nil, attachedErr(a.err)
		}
		return attachedConn{a.s}, nil
	case <-cancel:
		return nil, os.ErrDeadlineExceeded
	case <-q.quit:
		return nil, net.ErrClosed // as a closed queue listener says
	}
}

// close closes every queue's listener, stops the accepting goroutines and
// aborts the connections they accepted that nobody took.
func (q *queuesListener) close() error {
	var first error
	q.once.Do(func() {
		close(q.quit)
		for _, l := range q.ls {
			if err := l.Close(); err != nil && first == nil {
				first = err
			}
		}
		q.wg.Wait()
		for {
			select {
			case a := <-q.accepted:
				if a.s != nil {
					a.s.Abort()
				}
				continue
			default:
			}
			break
		}
	})
	return attachedErr(first)
}

func (q *queuesListener) port() uint16 { return q.ls[0].Port() }
