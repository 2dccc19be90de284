package sockapi

import (
	"context"
	"errors"
	"net/netip"

	"github.com/ndpstack/ndpstack/internal/capture"
	"github.com/ndpstack/ndpstack/internal/engine"
	"github.com/ndpstack/ndpstack/ndp"
)

// embedded is the backend that runs an internal/engine.Stack in this
// process: calls go straight to the engine, and the goroutine that waits
// drives it.
type embedded struct {
	s       *engine.Stack
	capture *capture.Writer // nil: no capture (Config.CaptureFile)
}

func (e *embedded) dial(ctx context.Context, ip netip.Addr, port uint16, o dialOptions) (backendConn, error) {
	c, err := e.s.Dial(ctx, ip.As4(), port, ndp.DialOptions{
		Size: o.size, Deadline: ndp.Time(o.deadline), Priority: o.priority, Paced: o.paced,
	})
	if err != nil {
		return nil, err
	}
	return embeddedConn{c}, nil
}

func (e *embedded) dialWrite(ctx context.Context, ip netip.Addr, port uint16, o dialOptions, p []byte, closeWrite bool) (backendConn, int, error) {
	c, n, err := e.s.DialWrite(ctx, ip.As4(), port, ndp.DialOptions{
		Size: o.size, Deadline: ndp.Time(o.deadline), Priority: o.priority, Paced: o.paced,
	}, p, closeWrite)
	if c == nil {
		return nil, 0, err
	}
	return embeddedConn{c}, n, err
}

func (e *embedded) listen(port uint16, backlog int) (backendListener, error) {
	l, err := e.s.Listen(port, backlog)
	if err != nil {
		return nil, err
	}
	return embeddedListener{l}, nil
}

func (e *embedded) localAddr() netip.Addr { return netip.AddrFrom4(e.s.LocalAddr().IP) }
func (e *embedded) now() int64            { return int64(e.s.Now()) }
func (e *embedded) poll() bool            { return e.s.Poll() }
func (e *embedded) close() error {
	err := e.s.Close()
	if e.capture != nil {
		if cerr := e.capture.Close(); err == nil && !errors.Is(cerr, capture.ErrClosed) {
			err = cerr
		}
	}
	return err
}

type embeddedConn struct{ c *engine.Conn }

func (c embeddedConn) read(p []byte, atLeast int, cancel <-chan struct{}) (int, error) {
	return c.c.ReadAtLeast(p, atLeast, cancel)
}
func (c embeddedConn) write(p []byte, closeWrite bool, cancel <-chan struct{}) (int, error) {
	return c.c.Write(p, closeWrite, cancel)
}
func (c embeddedConn) closeWrite() error { return c.c.CloseWrite() }
func (c embeddedConn) close() error      { return c.c.Close() }
func (c embeddedConn) abort() error      { return c.c.Abort() }
func (c embeddedConn) closeReuse() error { return c.c.CloseAndReuse() }
func (c embeddedConn) closeReuseSoon()   { c.c.CloseAndReuseSoon() }
func (c embeddedConn) abortTooLarge() error {
	return c.c.AbortCode(ndp.ResetTooLarge)
}
func (c embeddedConn) remote() (netip.Addr, uint16) {
	r := c.c.Remote()
	return netip.AddrFrom4(r.IP), r.Port
}
func (c embeddedConn) localPort() uint16 { return c.c.LocalPort() }

type embeddedListener struct{ l *engine.Listener }

func (l embeddedListener) accept(cancel <-chan struct{}) (backendConn, error) {
	c, err := l.l.Accept(cancel)
	if err != nil {
		return nil, err
	}
	return embeddedConn{c}, nil
}
func (l embeddedListener) close() error { return l.l.Close() }
func (l embeddedListener) port() uint16 { return l.l.Port() }

func (e *embedded) stats() (Stats, error)              { return statsFromEngine(e.s.Stats()), nil }
func (e *embedded) engineStats() (engine.Stats, error) { return e.s.StatsSnapshot(), nil }
