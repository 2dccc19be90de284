package sockapi

import (
	"context"
	"net/netip"
	"time"

	"github.com/ndpstack/ndpstack/internal/engine"
)

// backend is what a Stack runs on. Two implementations:
//
//   - embedded (embedded.go): an internal/engine.Stack in this process,
//     driven by the goroutines that wait on it (Open, OpenPipe);
//   - attached (attach*.go, owned by the daemon side): ndpd over the
//     shared-memory rings of package ring (Attach).
//
// Contract, for every implementation:
//
//   - Blocking calls take cancel, a channel that is closed when the caller's
//     deadline passes (it may be nil: no deadline). When it is closed the
//     call returns os.ErrDeadlineExceeded at once, without side effects
//     beyond what it already did (write returns the bytes accepted so far).
//   - Errors are the package's sentinels (or errors wrapping them, which
//     errors.Is finds): io.EOF (peer closed its side, unwrapped),
//     net.ErrClosed (the conn / listener was closed locally),
//     ErrConnReset, ErrConnRefused, ErrDeadlineUnmeetable, ErrTimeout,
//     ErrNoRoute (neighbour resolution failed), ErrDaemonGone (attached
//     backend: ndpd died or is draining), ErrTooManyConns, ErrResolverBusy
//     (attached), ErrStackClosed (the Stack was closed). The
//     public layer wraps them in *net.OpError; it does not translate them.
//   - close on a conn makes its blocked read and write return
//     net.ErrClosed; close on a listener makes accept return net.ErrClosed;
//     close on the backend makes everything return ErrStackClosed (or
//     ErrDaemonGone).
//   - All methods are safe for concurrent use; one read and one write may
//     block on the same conn at once.
type backend interface {
	// dial opens a connection to ip:port (NDP port). Zero-RTT: it may
	// return before anything was sent; a refusal surfaces on read/write.
	dial(ctx context.Context, ip netip.Addr, port uint16, o dialOptions) (backendConn, error)
	// listen accepts connections on an NDP port; backlog <= 0 means a default.
	listen(port uint16, backlog int) (backendListener, error)
	// localAddr is the stack's IPv4 address.
	localAddr() netip.Addr
	// now is the clock D3 deadlines are expressed on (nanoseconds).
	now() int64
	// stats reports the stack's counters (ErrStatsUnavailable if it has none to give).
	stats() (Stats, error)
	// engineStats reports the engine's counters for a metrics scrape
	// without contending with the data path (engine.Stack.StatsSnapshot;
	// ErrStatsUnavailable if there are none).
	engineStats() (engine.Stats, error)
	// poll drives the stack once (receive, timers, transmit) and reports
	// whether it did any work; false where the backend is driven
	// elsewhere (attached: ndpd's core loop).
	poll() bool
	close() error
}

// dialWriter is a backend that dials and queues the first bytes of a
// message in one call (embedded: engine.Stack.DialWrite, one lock section
// and one clock reading instead of two each): n bytes of p were taken, and
// with closeWrite and n == len(p) the FIN too. It does not block: the rest
// of p is the caller's to write. A nil backendConn means the dial failed.
type dialWriter interface {
	dialWrite(ctx context.Context, ip netip.Addr, port uint16, o dialOptions, p []byte, closeWrite bool) (backendConn, int, error)
}

// soonCloser is a backendConn that can release a conn whose stream was
// read to its end (CallInto's, after its response) off the caller's path
// (embedded: engine.Conn.CloseAndReuseSoon, released by the stack's next
// idle poll).
type soonCloser interface {
	closeReuseSoon()
}

// backendConn is one connection of a backend.
type backendConn interface {
	// read blocks until bytes are buffered; with atLeast > 1 a backend
	// may wait for that many, or the end of the stream, before it returns
	// (a message read to its end: engine.Conn.ReadAtLeast), and may
	// return io.EOF with bytes that end the stream.
	read(p []byte, atLeast int, cancel <-chan struct{}) (int, error)
	// write writes all of p unless an error or cancel stops it; with
	// closeWrite the write side is closed (FIN) after p in the same batch.
	write(p []byte, closeWrite bool, cancel <-chan struct{}) (int, error)
	closeWrite() error
	// close releases the connection (FIN if the peer's stream was read to
	// the end, else reset); abort always resets.
	close() error
	abort() error
	// abortTooLarge resets the connection telling the peer its message was
	// over the size limit (ErrMessageTooLarge), where the backend can.
	abortTooLarge() error
	// closeReuse is close for a conn nobody uses again (CallInto's): the
	// backend may reuse its memory for a later connection.
	closeReuse() error
	// remote is the peer's IPv4 address and NDP port; localPort is the
	// local NDP port (0 when unknown).
	remote() (netip.Addr, uint16)
	localPort() uint16
}

// backendListener accepts connections on one port.
type backendListener interface {
	accept(cancel <-chan struct{}) (backendConn, error)
	close() error
	port() uint16
}

// dialOptions are the resolved DialOptions handed to a backend.
type dialOptions struct {
	size     int64 // D3 size hint in bytes, 0 = none
	deadline int64 // D3 deadline on the backend's clock (backend.now), 0 = none
	priority uint8
	paced    bool
	timeout  time.Duration // unused by backends; Dial applies it to ctx

	d3Deadline time.Time // WithDeadline, converted to deadline by Dial
}
