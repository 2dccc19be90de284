package sockapi

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
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
	c, err := daemon.Attach(socketPath, ccfg)
	if err != nil {
		return nil, fmt.Errorf("sockapi: attach: %w", err)
	}
	return newStack(&attached{c: c, path: socketPath, epoch: time.Now()}), nil
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

// attached is the backend of an attached Stack: a daemon.Client.
type attached struct {
	c     *daemon.Client
	path  string    // control socket, for status queries
	epoch time.Time // origin of now()
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
	s, err := a.c.Dial(netip.AddrPortFrom(ip, port), opts)
	if err != nil {
		return nil, attachedErr(err)
	}
	return attachedConn{s}, nil
}

func (a *attached) listen(port uint16, _ int) (backendListener, error) {
	l, err := a.c.Listen(port)
	if err != nil {
		return nil, attachedErr(err)
	}
	return attachedListener{l}, nil
}

func (a *attached) localAddr() netip.Addr { return a.c.LocalAddr() }
func (a *attached) now() int64            { return int64(time.Since(a.epoch)) }
func (a *attached) stats() (Stats, error) {
	st, err := a.engineStats()
	if err != nil {
		return Stats{}, err
	}
	return statsFromEngine(st), nil
}

func (a *attached) engineStats() (engine.Stats, error) {
	snap, err := daemon.QueryStatus(a.path)
	if err != nil {
		return engine.Stats{}, fmt.Errorf("sockapi: ndpd status: %w", attachedErr(err))
	}
	if snap.Engine == nil {
		return engine.Stats{}, ErrStatsUnavailable
	}
	return *snap.Engine, nil
}
func (a *attached) close() error { return attachedErr(a.c.Close()) }

type attachedConn struct{ s *daemon.ClientSock }

func (c attachedConn) read(p []byte, cancel <-chan struct{}) (int, error) {
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
