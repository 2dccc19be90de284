package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/ndpstack/ndpstack/ring"
)

// Control socket protocol (SOCK_SEQPACKET, so every message keeps its
// boundaries and an SCM_RIGHTS attachment cannot be merged with text):
//
//	app → ndpd   "ATTACH [i]"      ndpd → app  "OK <ipv4|-> <n> <peer|spread>", then the ring.Attachment message
//	                                            or "ERR <reason>"
//	any → ndpd   "STATUS"          ndpd → any  JSON Snapshot, or "ERR <reason>"
//	any → ndpd   "RSS"             ndpd → any  JSON RSS (placement "rss"), or "ERR <reason>"
//
// A daemon serving n queues runs one Core per queue; "ATTACH i" attaches
// to the i-th (0 <= i < n; "ATTACH" is "ATTACH 0"), and the reply tells n,
// so an application attaches once per queue, each over its own control
// connection (Client, AttachQueues), and how to place dials (Placement). STATUS answers the first queue's
// snapshot with every queue's in Snapshot.Queues.
//
// Before reading the request the server checks the peer's credentials
// (SO_PEERCRED, taken by the kernel at connect time) against the allowed
// uids/gids and answers "ERR not allowed ..." otherwise. An attached
// application's control connection stays open for its lifetime: when it
// reads EOF (the application exited or was killed) the server detaches it
// from the core, which reclaims everything it held; when the daemon stops,
// it closes the connection and the application sees EOF (ErrDaemonGone).
const (
	reqAttachMsg = "ATTACH"
	reqStatusMsg = "STATUS"
	reqRSSMsg    = "RSS"
	maxCtlMsg    = 1 << 20
)

// ServerConfig configures the control socket.
type ServerConfig struct {
	// Path of the Unix socket. Required.
	Path string
	// Mode is the socket file's permission bits. Default 0660.
	Mode os.FileMode
	// Group, if non-zero, is the gid the socket file is chown'ed to (so
	// that members of an allowed group can connect). 0 = keep the daemon's.
	Group int
	// AllowUIDs and AllowGIDs: a peer may attach or query if its uid is in
	// AllowUIDs or its primary gid is in AllowGIDs. Both empty = only the
	// daemon's own uid.
	AllowUIDs []uint32
	AllowGIDs []uint32
	// Placement is how applications place their dials on the queues,
	// told to each in its attach reply. Default PlaceByPeer.
	Placement Placement
	// RSS is the NIC's hash for PlaceRSS (ReadRSS), served to applications
	// on request ("RSS").
	RSS *RSS
	// Logger; nil = no logs.
	Logger *zap.Logger
}

// Placement says which of a daemon's queues an application's dial goes
// through. A connection lives on the queue its frames arrive on; an
// accepted one is on the queue its first frame came in on, a dial must be
// placed where the peer's answers will arrive.
type Placement uint8

const (
	// PlaceByPeer: every dial to one peer address goes through one queue,
	// chosen by a hash of the address: for one queue (the only choice),
	// and PlaceRSS's fallback (docs/decisions.md, "Dial placement").
	PlaceByPeer Placement = iota
	// PlaceSpread: dials go round-robin over the queues, for links that
	// deliver a frame on the peer's RX queue numbered as the TX queue it
	// left on, so that the peer's answers come back on the dial's queue
	// (veth, both ends serving the same queues).
	PlaceSpread
	// PlaceRSS: a dial goes to the queue the NIC's Toeplitz RSS delivers
	// the peer's frames to (RSS.Index), which the application computes from
	// the key and indirection table the daemon serves.
	PlaceRSS
)

var placementNames = [...]string{PlaceByPeer: "peer", PlaceSpread: "spread", PlaceRSS: "rss"}

func (p Placement) String() string {
	if int(p) < len(placementNames) {
		return placementNames[p]
	}
	return "peer"
}

// parsePlacement is String's inverse; unknown names are PlaceByPeer.
func parsePlacement(s string) Placement {
	for p, n := range placementNames {
		if n == s {
			return Placement(p)
		}
	}
	return PlaceByPeer
}

// Server accepts applications on the control socket and attaches them to
// the Core of the queue they ask for.
type Server struct {
	cfg   ServerConfig
	cores []*Core
	log   *zap.Logger
	ln    *net.UnixListener

	mu     sync.Mutex
	conns  map[*net.UnixConn]struct{}
	closed bool
	wg     sync.WaitGroup

	refused atomic.Uint64
}

// Refused returns how many peers were refused for their credentials.
func (s *Server) Refused() uint64 { return s.refused.Load() }

// Listen creates the control socket at cfg.Path for the cores of the
// queues served, in order (at least one). A stale socket file (no daemon
// answers on it) is replaced; a live one is an error.
func Listen(cfg ServerConfig, cores ...*Core) (*Server, error) {
	if len(cores) == 0 {
		return nil, fmt.Errorf("%w: no core to serve", ring.ErrBadConfig)
	}
	if cfg.Path == "" {
		return nil, fmt.Errorf("%w: control socket path is empty", ring.ErrBadConfig)
	}
	if cfg.Mode == 0 {
		cfg.Mode = 0o660
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if len(cfg.AllowUIDs) == 0 && len(cfg.AllowGIDs) == 0 {
		cfg.AllowUIDs = []uint32{uint32(os.Geteuid())}
	}
	if fi, err := os.Lstat(cfg.Path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("ndpd: %s exists and is not a socket", cfg.Path)
		}
		if c, err := net.Dial("unixpacket", cfg.Path); err == nil {
			c.Close()
			return nil, fmt.Errorf("ndpd: another daemon is listening on %s", cfg.Path)
		}
		os.Remove(cfg.Path)
	}
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: cfg.Path, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("ndpd: control socket: %w", err)
	}
	ln.SetUnlinkOnClose(true)
	if err := os.Chmod(cfg.Path, cfg.Mode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("ndpd: chmod control socket: %w", err)
	}
	if cfg.Group > 0 {
		if err := os.Chown(cfg.Path, -1, cfg.Group); err != nil {
			ln.Close()
			return nil, fmt.Errorf("ndpd: chown control socket: %w", err)
		}
	}
	return &Server{cfg: cfg, cores: cores, log: cfg.Logger, ln: ln, conns: make(map[*net.UnixConn]struct{})}, nil
}

// Addr returns the socket path.
func (s *Server) Addr() string { return s.cfg.Path }

// Serve accepts control connections until Close. It returns nil after Close.
func (s *Server) Serve() error {
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		if !s.track(c) {
			c.Close()
			return nil
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.untrack(c)
			s.serveConn(c)
		}()
	}
}

func (s *Server) track(c *net.UnixConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) untrack(c *net.UnixConn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	c.Close()
}

// StopAccepting closes the listening socket (and removes its file): no new
// application can attach. Attached ones keep their connections.
func (s *Server) StopAccepting() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.ln.Close()
}

// Close stops accepting, closes every control connection (attached
// applications see ErrDaemonGone) and waits for the per-connection goroutines.
func (s *Server) Close() error {
	s.StopAccepting()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// PeerCredOf returns the kernel's SO_PEERCRED record of a Unix connection.
func PeerCredOf(c *net.UnixConn) (PeerCred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return PeerCred{}, err
	}
	var uc *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		uc, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return PeerCred{}, err
	}
	if serr != nil {
		return PeerCred{}, fmt.Errorf("ndpd: SO_PEERCRED: %w", serr)
	}
	return PeerCred{PID: uc.Pid, UID: uc.Uid, GID: uc.Gid}, nil
}

func (s *Server) allowed(p PeerCred) bool {
	return slices.Contains(s.cfg.AllowUIDs, p.UID) || slices.Contains(s.cfg.AllowGIDs, p.GID)
}

func (s *Server) serveConn(c *net.UnixConn) {
	peer, err := PeerCredOf(c)
	if err != nil {
		s.log.Warn("control connection without credentials", zap.Error(err))
		return
	}
	// Read the request first even from a peer about to be refused: closing
	// a socket with unread data resets it, and the peer would see
	// ECONNRESET instead of the reason.
	var buf [64]byte
	n, err := c.Read(buf[:])
	if err != nil {
		return
	}
	if !s.allowed(peer) {
		s.refused.Add(1)
		s.log.Warn("refused peer", zap.Int32("pid", peer.PID), zap.Uint32("uid", peer.UID), zap.Uint32("gid", peer.GID))
		c.Write([]byte(fmt.Sprintf("ERR %v: uid %d gid %d", ErrNotAllowed, peer.UID, peer.GID)))
		return
	}
	req := strings.Fields(string(buf[:n]))
	switch {
	case len(req) == 1 && req[0] == reqStatusMsg:
		snap, err := s.status()
		if err != nil {
			c.Write([]byte("ERR " + err.Error()))
			return
		}
		b, _ := json.Marshal(snap)
		c.Write(b)
	case len(req) == 1 && req[0] == reqRSSMsg:
		if s.cfg.RSS == nil {
			c.Write([]byte("ERR " + ErrProtocol.Error() + ": no RSS placement"))
			return
		}
		b, _ := json.Marshal(s.cfg.RSS)
		c.Write(b)
	case len(req) >= 1 && len(req) <= 2 && req[0] == reqAttachMsg:
		q := 0
		if len(req) == 2 {
			if q, err = strconv.Atoi(req[1]); err != nil || q < 0 || q >= len(s.cores) {
				c.Write([]byte(fmt.Sprintf("ERR %v: queue index %q of %d", ErrProtocol, req[1], len(s.cores))))
				return
			}
		}
		s.serveAttach(c, peer, s.cores[q])
	default:
		c.Write([]byte("ERR " + ErrProtocol.Error() + ": unknown request"))
	}
}

// status is the first core's snapshot, with every core's in Queues when
// there are several.
func (s *Server) status() (Snapshot, error) {
	snap, err := s.cores[0].Status()
	if err != nil || len(s.cores) == 1 {
		return snap, err
	}
	all := []Snapshot{snap}
	for _, core := range s.cores[1:] {
		q, err := core.Status()
		if err != nil {
			return snap, fmt.Errorf("queue %d: %w", core.Queue(), err)
		}
		all = append(all, q)
	}
	snap.Queues = all
	return snap, nil
}

func (s *Server) serveAttach(c *net.UnixConn, peer PeerCred, core *Core) {
	app, att, err := core.Attach(peer, func() { c.Close() })
	if err != nil {
		s.log.Warn("attach refused", zap.Int32("pid", peer.PID), zap.Error(err))
		c.Write([]byte("ERR " + err.Error()))
		return
	}
	// att holds duplicates of the region's descriptors, ours to close, so a
	// core that reclaims the app meanwhile cannot make us send stale numbers.
	ok := "OK -"
	if a := core.LocalAddr(); a.IsValid() {
		ok = "OK " + a.String()
	}
	ok += " " + strconv.Itoa(len(s.cores)) + " " + s.cfg.Placement.String()
	_, err = c.Write([]byte(ok))
	if err == nil {
		err = ring.SendAttachment(c, att)
	}
	att.Close()
	if err == nil {
		// Block until the application goes away (EOF or error). Nothing else
		// travels on this connection.
		var b [1]byte
		for {
			if _, err = c.Read(b[:]); err != nil {
				break
			}
		}
	}
	if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed) {
		err = nil
	}
	if derr := core.Detach(app); derr != nil && !errors.Is(derr, ErrStopped) {
		s.log.Warn("detach", zap.Error(derr))
	}
}
