package sockapi

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Stack is an NDP stack: embedded in this process (Open, OpenPipe) or
// attached to the ndpd daemon (Attach). Its methods are safe for
// concurrent use.
type Stack struct {
	b    backend
	addr netip.Addr
	msg  messageCounters // message servers' (RecvMessage) counters

	mu        sync.Mutex
	callConns []*Conn // Conns closed by CallInto or CloseAndReuse, reused (callConn, putCallConn)
}

func newStack(b backend) *Stack { return &Stack{b: b, addr: b.localAddr()} }

// Addr is the stack's IPv4 address.
func (s *Stack) Addr() netip.Addr { return s.addr }

// Poll drives an embedded stack once: it receives what arrived, runs the
// due timers and sends what is queued, and reports whether it did any
// work. A stack with a background poller (the default) needs no Poll; one
// opened with NoBackgroundPoller moves only while a call waits on it, so
// what its last call left to send (a Close's ACK, which waits for the next
// call's transmit in PollBusy) and its timers wait for the next call, or
// for Poll. An attached stack (ndpd drives it) reports false.
func (s *Stack) Poll() bool { return s.b.poll() }

// Close closes every connection and listener of the stack (blocked calls
// return ErrStackClosed) and releases the interface.
func (s *Stack) Close() error { return s.b.close() }

// Dial opens an NDP connection to addr ("10.0.0.2:7"). NDP is zero-RTT:
// Dial only registers the connection (after resolving the peer's MAC
// address through the kernel's neighbour table, which may block until ctx
// ends); the first Write sends data at once. A refused connection
// (ErrConnRefused) is reported by the first Read or Write after the
// refusal arrived, one round trip later.
func (s *Stack) Dial(ctx context.Context, addr string, opts ...DialOption) (*Conn, error) {
	a, err := ParseAddr(addr)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "ndp", Err: err}
	}
	return s.DialAddr(ctx, a, opts...)
}

// DialAddr is Dial with a parsed address.
func (s *Stack) DialAddr(ctx context.Context, a Addr, opts ...DialOption) (*Conn, error) {
	bc, _, err := s.dialBackend(ctx, a, opts, nil, false)
	if err != nil {
		return nil, err
	}
	return s.callConn(bc), nil
}

// maxCallConns bounds a Stack's free list of reusable Conns.
const maxCallConns = 64

// callConn returns a Conn for bc from the free list (a new one if empty).
func (s *Stack) callConn(bc backendConn) *Conn {
	s.mu.Lock()
	var c *Conn
	if n := len(s.callConns); n > 0 {
		c = s.callConns[n-1]
		s.callConns = s.callConns[:n-1]
	}
	s.mu.Unlock()
	if c == nil {
		c = &Conn{s: s}
	}
	c.init(bc, Addr{IP: s.addr})
	return c
}

// putCallConn returns c, closed and with no deadline hook left, to the
// free list.
func (s *Stack) putCallConn(c *Conn) {
	c.rd.clear() // stops a deadline's timer
	c.wd.clear()
	c.b = nil
	s.mu.Lock()
	if len(s.callConns) < maxCallConns {
		s.callConns = append(s.callConns, c)
	}
	s.mu.Unlock()
}

// dialBackend is DialAddr without the Conn.
//
// With withFirst (CallInto's request in first) a backend that can (dialWriter)
// also queues first's bytes, and its FIN once they all fit, in the same
// call: sent is how many it took (the rest and the FIN are the caller's
// to write), or -1 when it took none because it cannot. An error with a
// connection is the write's, unwrapped; without one, the dial's.
func (s *Stack) dialBackend(ctx context.Context, a Addr, opts []DialOption, first []byte, withFirst bool) (bc backendConn, sent int, err error) {
	o := applyDialOptions(opts)
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	if !o.d3Deadline.IsZero() {
		o.deadline = s.b.now() + int64(time.Until(o.d3Deadline))
		if o.deadline <= 0 {
			o.deadline = 1
		}
	}
	if dw, ok := s.b.(dialWriter); ok && withFirst {
		if bc, sent, err = dw.dialWrite(ctx, a.IP, a.Port, o, first, true); bc != nil {
			return bc, sent, err
		}
	} else if bc, err = s.b.dial(ctx, a.IP, a.Port, o); err == nil {
		return bc, -1, nil
	}
	return nil, 0, &net.OpError{Op: "dial", Net: "ndp", Source: Addr{IP: s.addr}, Addr: a, Err: err}
}

// Listen accepts connections on NDP port port.
func (s *Stack) Listen(port uint16) (*Listener, error) {
	bl, err := s.b.listen(port, 0)
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: "ndp", Addr: Addr{IP: s.addr, Port: port}, Err: err}
	}
	return &Listener{s: s, b: bl, local: Addr{IP: s.addr, Port: port}, msgCnt: &s.msg}, nil
}

// applyDialOptions resolves opts. Only a call that passes options pays for
// the struct the option functions write through (it escapes to the heap);
// the common call without options allocates nothing here.
func applyDialOptions(opts []DialOption) dialOptions {
	if len(opts) == 0 {
		return dialOptions{}
	}
	var o dialOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}
