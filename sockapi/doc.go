// Package sockapi is ndpstack's public Go API: NDP connections as net.Conn
// and net.Listener, plus a message API for RPC.
//
// # Stacks
//
// A Stack is one NDP stack on one interface queue. Open runs it embedded in
// this process (AF_XDP socket, XDP steering program, the engine's core loop
// driven by the goroutines that wait on it); Attach (daemon mode) talks to
// the ndpd daemon over shared-memory rings so several processes can share
// a NIC; OpenPipe joins two embedded stacks by an in-memory cable for tests
// and examples. All three behave the same behind the API.
//
//	s, _ := sockapi.Open(sockapi.Config{Interface: "eth1"})
//	c, _ := s.Dial(ctx, "10.0.0.2:7")   // zero-RTT: nothing is sent yet
//	c.Write(req)                          // first-RTT window leaves now
//	c.Read(resp)
//
// # Semantics
//
// Conn implements net.Conn fully: concurrent Read and Write, deadlines
// (errors match os.ErrDeadlineExceeded and are net.Errors with Timeout()),
// Close unblocking both with net.ErrClosed, CloseWrite for half-close.
// Errors are *net.OpError values wrapping the package's sentinels; match
// with errors.Is: ErrConnRefused (nobody listens: reported by the first
// Read or Write after the dial, one round trip later, because NDP has no
// handshake), ErrConnReset, ErrDeadlineUnmeetable (the D3 deadline hint
// cannot be met: the connection is quenched at both ends at once),
// ErrTimeout, ErrNoRoute, ErrStackClosed, ErrDaemonGone.
//
// # Messages
//
// One message is one connection: the sender writes it and closes its side,
// the receiver reads to EOF. Call sends a request and reads the response
// (an RPC costs one round trip, no handshake); Listener.RecvMessage and
// Message.Reply are the server side; SendMessage is one-way.
// RecvMessage reads many messages at once and hands them out as they
// complete; what fails for one message (too large, too slow, reset) is
// reset and counted in Stats.Messages, never a RecvMessage error, and
// MessageConfig bounds what a listener reads ahead (per message time,
// messages per listener and per peer).
//
// # Hints
//
// WithSize and WithDeadline are D3 hints carried in the first-RTT packets:
// the receiver's pull scheduler (PolicyDeadline) gives the flow the rate it
// needs or quenches it. WithPriority selects a strict priority class;
// WithPacing asks the sender's edge pacer to pace the first-RTT burst.
//
// # Polling
//
// PollBusy makes waiting goroutines spin on the NIC (lowest latency, one
// core each); PollAdaptive (default) spins briefly, then sleeps on the
// AF_XDP socket until frames arrive or a timer is due.
package sockapi
