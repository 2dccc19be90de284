package sockapi

import (
	"errors"

	"github.com/ndpstack/ndpstack/internal/engine"
	"github.com/ndpstack/ndpstack/ndp"
)

// Sentinel errors. Match them with errors.Is: calls return them wrapped in
// *net.OpError. They are the same values as package ndp's, so either name
// matches.
var (
	// ErrConnReset: the peer aborted the connection.
	ErrConnReset = ndp.ErrConnReset
	// ErrConnRefused: nobody listens on the remote port (or the remote
	// connection table is full). With zero-RTT dialing it is reported by
	// the first Read or Write after the data reached the peer, within one
	// round trip of Dial.
	ErrConnRefused = ndp.ErrConnRefused
	// ErrDeadlineUnmeetable: the connection was quenched because its D3
	// deadline (WithDeadline) cannot be met; both ends get it at once
	// instead of a late answer.
	ErrDeadlineUnmeetable = ndp.ErrDeadlineUnmeetable
	// ErrTimeout: the connection expected something from its peer and heard
	// nothing from it for Config.UserTimeout (the peer or the path is gone).
	ErrTimeout = ndp.ErrTimeout
	// ErrNoRoute: the peer's IPv4 address could not be resolved to a MAC
	// address (no ARP answer).
	ErrNoRoute = engine.ErrNoNeighbor
	// ErrStackClosed: the Stack was closed.
	ErrStackClosed = engine.ErrStackClosed
	// ErrDaemonGone: the ndpd daemon this Stack is attached to went away
	// (or is draining to stop: new connections and listeners are refused);
	// every connection of the Stack fails with it.
	ErrDaemonGone = errors.New("sockapi: ndpd daemon gone")
	// ErrTooManyConns: the stack's connection table (embedded: MaxConns;
	// attached: the application's socket slots in ndpd) is full.
	ErrTooManyConns = ndp.ErrTooManyConns
	// ErrResolverBusy: ndpd has too many neighbour resolutions in progress
	// to take this dial's; retry later.
	ErrResolverBusy = errors.New("sockapi: ndpd resolver busy")
	// ErrInvalidConfig wraps every Config validation failure.
	ErrInvalidConfig = errors.New("sockapi: invalid config")
	// ErrMessageTooLarge: a message is larger than its receiver takes:
	// CallInto's response buffer is too small, or (Call, SendMessage, a
	// Conn's Read or Write) the server's message server reset the
	// message for being over its MessageConfig.MaxSize.
	ErrMessageTooLarge = ndp.ErrMessageTooLarge
	// ErrStatsUnavailable: Stack.Stats on a stack attached to an ndpd
	// whose transport keeps no counters.
	ErrStatsUnavailable = errors.New("sockapi: the daemon reports no stack counters")
)
