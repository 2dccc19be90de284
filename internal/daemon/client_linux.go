package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ndpstack/ndpstack/ring"
)

// ClientConfig tunes the application side. The zero value is valid.
type ClientConfig struct {
	// SpinFor is how long a waiting call (Read, Accept, Write out of
	// frames) keeps polling the rings itself before it sleeps. Default 0:
	// on a machine with fewer cores than busy threads (the 2-vCPU test VM
	// runs two daemons and two applications) spinning only steals the CPU
	// the peer needs (docs/decisions.md, ndpd). Negative = never spin.
	// SpinForever polls until the call completes or its deadline passes.
	SpinFor time.Duration
}

// SpinForever as ClientConfig.SpinFor: busy polling, never sleep.
const SpinForever = time.Duration(math.MaxInt64)

func (c *ClientConfig) populate() {}

// Client is an application's attachment to ndpd: the control connection,
// the mapped region and buffer area, and the application side of every
// ring.
//
// Ring ownership on this side: whichever goroutine holds pollMu consumes
// the event, completion and RX rings (the goroutines that wait poll for
// themselves, clientwait_linux.go); API goroutines produce on the cmd, TX
// and release rings under mu. One owner at a time per ring, the mutex
// orders them. See doc.go.
type Client struct {
	cfg    ClientConfig
	ctl    *net.UnixConn
	region *ring.Region
	end    *ring.AppEnd
	buf    *ring.BufferArea
	layout ring.Layout
	local  netip.Addr
	queues int       // queues the daemon serves (its attach reply)
	place  Placement // how to place dials on them (its attach reply)
	rss    *RSS      // PlaceRSS: the NIC's hash (AttachQueues fetches it)

	mu          sync.Mutex // cmd, TX and release producers; frames; slot and cookie allocation
	frames      *ring.FrameStack
	dialFree    []int
	dials       uint64 // dials made: the generation in each OpConnect's cookie (under mu)
	cookie      uint64
	relPending  []ring.Desc
	waiters     map[uint64]*pendingReply
	listeners   map[uint16]*ClientListener
	socks       []*ClientSock // by slot; set under mu
	slotQ       [][]ring.Desc // per-slot RX queue storage, reused by each socket of the slot
	inflight    []int32       // per slot: TX frames not yet completed
	maxInflight int32         // per-socket cap (a blocked socket must not hold the whole partition)
	dead        bool          // Close unmapped everything (guarded by mu and pollMu)

	pollMu    sync.Mutex // consumers (events, completions, RX) and their dispatch
	sleeping  atomic.Bool
	parked    atomic.Int32
	tokFree   chan struct{}
	sleepWord *uint32   // region's appSleeping word, a count of sleepers
	sleepMap  sleepFlag // its mapping
	wakeFD    int       // region's WakeApp eventfd (the region closes it)
	intrFD    int       // ours: Close and daemon death wake the sleeper

	framesAvail chan struct{} // completions returned frames (cap 1)
	gone        chan struct{}
	goneOnce    sync.Once
	closing     atomic.Bool
	evBuf       [64]ring.Desc
	complBuf    [256]ring.Desc
	rxBuf       [64]ring.Desc
}

// Attach connects to ndpd's control socket at path, receives and maps the
// region and the buffer area of the daemon's first queue, and watches the
// control connection. Errors: ErrNotAllowed (credentials refused),
// ErrDraining, ring.ErrNoPartition wrapped in the daemon's message, or the
// dial error.
func Attach(path string, cfg ClientConfig) (*Client, error) {
	return AttachQueue(path, 0, cfg)
}

// AttachQueues attaches to every queue the daemon at path serves, in its
// order (Attach to the first, which tells how many there are, then
// AttachQueue to each other one). On an error every attachment made is
// closed.
func AttachQueues(path string, cfg ClientConfig) ([]*Client, error) {
	c, err := AttachQueue(path, 0, cfg)
	if err != nil {
		return nil, err
	}
	if c.place == PlaceRSS {
		if c.rss, err = queryRSS(path); err != nil {
			c.Close()
			return nil, err
		}
	}
	cs := []*Client{c}
	for i := 1; i < c.Queues(); i++ {
		ci, err := AttachQueue(path, i, cfg)
		if err != nil {
			for _, c := range cs {
				c.Close()
			}
			return nil, fmt.Errorf("ndpd: queue %d of %d: %w", i, c.Queues(), err)
		}
		cs = append(cs, ci)
	}
	return cs, nil
}

// AttachQueue is Attach to the daemon's queue of index i (0 <= i <
// Queues()), served by its own core loop.
func AttachQueue(path string, i int, cfg ClientConfig) (*Client, error) {
	cfg.populate()
	ctl, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("ndpd: attach %s: %w", path, err)
	}
	fail := func(err error) (*Client, error) {
		ctl.Close()
		return nil, err
	}
	req := reqAttachMsg
	if i != 0 {
		req += " " + strconv.Itoa(i)
	}
	if _, err := ctl.Write([]byte(req)); err != nil {
		return fail(fmt.Errorf("ndpd: attach %s: %w", path, err))
	}
	var msg [512]byte
	n, err := ctl.Read(msg[:])
	if err != nil {
		return fail(fmt.Errorf("ndpd: attach %s: %w", path, err))
	}
	if err := replyErr(msg[:n]); err != nil {
		return fail(err)
	}
	var local netip.Addr
	queues, place := 1, PlaceByPeer
	if f := strings.Fields(string(msg[:n])); len(f) >= 2 {
		local, _ = netip.ParseAddr(f[1]) // "-": unknown
		if len(f) >= 3 {
			if q, err := strconv.Atoi(f[2]); err == nil && q > 0 {
				queues = q
			}
		}
		if len(f) >= 4 {
			place = parsePlacement(f[3])
		}
	}
	att, err := ring.RecvAttachment(ctl)
	if err != nil {
		return fail(fmt.Errorf("ndpd: attach %s: %w", path, err))
	}
	bufFD := att.Buffer
	region, err := ring.OpenRegion(att)
	if err != nil {
		closeFD(bufFD)
		return fail(err)
	}
	l := region.Layout()
	buf, err := ring.MapBufferArea(bufFD, l.BufferFrames, l.FrameSize)
	if err != nil {
		region.Close()
		return fail(err)
	}
	end, err := region.AppEnd()
	if err != nil {
		buf.Close()
		region.Close()
		return fail(err)
	}
	sw, err := mapSleepWord(region.FD(), appSleepingOff)
	if err != nil {
		buf.Close()
		region.Close()
		return fail(err)
	}
	intr, err := newDoorbell()
	if err != nil {
		sw.unmap()
		buf.Close()
		region.Close()
		return fail(err)
	}
	c := &Client{
		cfg: cfg, ctl: ctl, region: region, end: end, buf: buf, layout: l, local: local, queues: queues, place: place,
		frames:      ring.NewFrameStack(l.Part),
		waiters:     make(map[uint64]*pendingReply),
		listeners:   make(map[uint16]*ClientListener),
		socks:       make([]*ClientSock, l.Sockets),
		framesAvail: make(chan struct{}, 1),
		gone:        make(chan struct{}),
		tokFree:     make(chan struct{}, 1),
		relPending:  make([]ring.Desc, 0, 256),
		sleepWord:   sw.p,
		sleepMap:    sw,
		wakeFD:      region.Attachment(-1).WakeApp,
		intrFD:      intr,
	}
	for i := DialSlots(l.Sockets) - 1; i >= 0; i-- {
		c.dialFree = append(c.dialFree, i)
	}
	c.inflight = make([]int32, l.Sockets)
	c.maxInflight = int32(socketInflightCap(l.Part.Count))
	c.slotQ = make([][]ring.Desc, l.Sockets)
	for i := range c.slotQ {
		c.slotQ[i] = make([]ring.Desc, end.Sockets[i].RX.Spec().Slots)
	}
	go c.watchControl()
	return c, nil
}

// replyErr turns an "ERR ..." control reply into an error matching the
// sentinel it names.
func replyErr(b []byte) error {
	s := string(b)
	if s == "OK" || strings.HasPrefix(s, "OK ") {
		return nil
	}
	reason := strings.TrimPrefix(s, "ERR ")
	for _, e := range []error{ErrNotAllowed, ErrDraining, ring.ErrNoPartition, ErrProtocol} {
		if strings.Contains(reason, e.Error()) {
			return fmt.Errorf("%w (%s)", e, reason)
		}
	}
	return fmt.Errorf("ndpd: %s", reason)
}

// QueryStatus asks the daemon at path for its status snapshot.
func QueryStatus(path string) (Snapshot, error) {
	var snap Snapshot
	ctl, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		return snap, fmt.Errorf("ndpd: status %s: %w", path, err)
	}
	defer ctl.Close()
	if _, err := ctl.Write([]byte(reqStatusMsg)); err != nil {
		return snap, err
	}
	b := make([]byte, maxCtlMsg)
	n, err := ctl.Read(b)
	if err != nil {
		return snap, fmt.Errorf("ndpd: status %s: %w", path, err)
	}
	if strings.HasPrefix(string(b[:n]), "ERR ") {
		return snap, replyErr(b[:n])
	}
	if err := json.Unmarshal(b[:n], &snap); err != nil {
		return snap, fmt.Errorf("%w: status reply: %v", ErrProtocol, err)
	}
	return snap, nil
}

// LocalAddr is the daemon's IPv4 address (invalid if it did not say).
func (c *Client) LocalAddr() netip.Addr { return c.local }

// App returns the AppID the daemon assigned.
func (c *Client) App() ring.AppID { return c.layout.App }

// Queues is how many queues the daemon serves (AttachQueue's range).
func (c *Client) Queues() int { return c.queues }

// Placement is how the daemon asks applications to place dials on its
// queues.
func (c *Client) Placement() Placement { return c.place }

// RSS is the NIC's hash with PlaceRSS, as AttachQueues fetched it (nil
// otherwise, and on clients attached by AttachQueue).
func (c *Client) RSS() *RSS { return c.rss }

// queryRSS asks the daemon at path for its RSS placement.
func queryRSS(path string) (*RSS, error) {
	ctl, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("ndpd: rss %s: %w", path, err)
	}
	defer ctl.Close()
	ctl.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := ctl.Write([]byte(reqRSSMsg)); err != nil {
		return nil, fmt.Errorf("ndpd: rss %s: %w", path, err)
	}
	buf := make([]byte, maxCtlMsg)
	n, err := ctl.Read(buf)
	if err != nil {
		return nil, fmt.Errorf("ndpd: rss %s: %w", path, err)
	}
	if strings.HasPrefix(string(buf[:n]), "ERR ") {
		return nil, replyErr(buf[:n])
	}
	var r RSS
	if err := json.Unmarshal(buf[:n], &r); err != nil {
		return nil, fmt.Errorf("ndpd: rss reply: %w", err)
	}
	return &r, nil
}

// MaxPayload is the most bytes one TX or RX descriptor carries (the frame size).
func (c *Client) MaxPayload() int { return int(c.layout.FrameSize) }

// Gone is closed once the daemon went away (or Close was called).
func (c *Client) Gone() <-chan struct{} { return c.gone }

func (c *Client) markGone() {
	c.goneOnce.Do(func() {
		close(c.gone)
		c.interrupt()
	})
}

func (c *Client) goneErr() error {
	if c.closing.Load() {
		return ErrClientClosed
	}
	return ErrDaemonGone
}

// watchControl blocks on the control connection; EOF means the daemon stopped.
func (c *Client) watchControl() {
	var b [64]byte
	for {
		if _, err := c.ctl.Read(b[:]); err != nil {
			c.markGone()
			return
		}
	}
}

// Close detaches: the daemon aborts this application's connections and
// reclaims its buffers. Every blocked and later call returns ErrClientClosed.
func (c *Client) Close() error {
	if c.closing.Swap(true) {
		return ErrClientClosed
	}
	c.markGone()
	c.ctl.Close()
	// Take the sleeper token for good (a sleeper leaves within one slice;
	// the interrupt makes it leave at once), then both locks, so nothing
	// touches the mappings or the eventfd while they go away.
	for !c.sleeping.CompareAndSwap(false, true) {
		c.interrupt()
		time.Sleep(50 * time.Microsecond)
	}
	c.pollMu.Lock()
	c.mu.Lock()
	c.dead = true
	c.mu.Unlock()
	c.pollMu.Unlock()
	c.sleepMap.unmap()
	closeFD(c.intrFD)
	c.buf.Close()
	return c.region.Close()
}

// ---- producing (API goroutines, under mu) ----

// produceCmdLocked publishes ds on the cmd ring, waiting (without the lock)
// while it is full.
func (c *Client) produceCmd(ds []ring.Desc) error {
	for {
		select {
		case <-c.gone:
			return c.goneErr()
		default:
		}
		c.mu.Lock()
		if c.dead {
			c.mu.Unlock()
			return c.goneErr()
		}
		n, err := c.end.Cmd.Produce(ds)
		if n > 0 {
			c.end.Notifier.Notify()
		}
		c.mu.Unlock()
		if err != nil {
			return fmt.Errorf("%w: cmd ring: %v", ErrProtocol, err)
		}
		ds = ds[n:]
		if len(ds) == 0 {
			return nil
		}
		runtime.Gosched() // the daemon drains the cmd ring every iteration
	}
}

// pendingReply is one request waiting for its OpReply.
type pendingReply struct {
	st    Status
	done  atomic.Bool
	ready chan struct{} // cap 1
}

// request sends one command that the daemon answers with OpReply and waits
// for the answer.
func (c *Client) request(d ring.Desc) (Status, error) {
	w := &pendingReply{ready: make(chan struct{}, 1)}
	c.mu.Lock()
	c.cookie++
	d.Cookie = c.cookie
	c.waiters[d.Cookie] = w
	c.mu.Unlock()
	if err := c.produceCmd([]ring.Desc{d}); err != nil {
		return 0, err
	}
	if err := c.waitFor(w.done.Load, w.ready, nil, time.Time{}, nil); err != nil {
		return 0, err
	}
	return w.st, nil
}

// releaseFramesLocked hands read RX frames back to the daemon.
func (c *Client) releaseFramesLocked(ds []ring.Desc) {
	if c.dead {
		return
	}
	if len(c.relPending) > 0 || len(ds) > 0 {
		c.relPending = append(c.relPending, ds...)
		n, _ := c.end.Releases.Produce(c.relPending)
		c.relPending = c.relPending[:copy(c.relPending, c.relPending[n:])]
		if n > 0 {
			c.end.Notifier.Notify()
		}
	}
}

// ---- consuming (the goroutine holding pollMu) ----

func (c *Client) pollOnce() bool {
	work := false
	if n, err := c.end.Completions.Consume(c.complBuf[:]); n > 0 {
		c.mu.Lock()
		c.frames.PushDescs(c.complBuf[:n])
		for i := 0; i < n; i++ {
			if slot := c.complBuf[i].Conn; int(slot) < len(c.inflight) && c.inflight[slot] > 0 {
				c.inflight[slot]--
			}
		}
		c.mu.Unlock()
		select {
		case c.framesAvail <- struct{}{}:
		default:
		}
		work = true
	} else if err != nil {
		c.markGone()
	}
	n, err := c.end.Events.Consume(c.evBuf[:])
	if err != nil {
		c.markGone()
	}
	for i := 0; i < n; i++ {
		c.event(&c.evBuf[i])
	}
	work = work || n > 0
	for slot := range c.end.Sockets {
		if c.rxSlot(slot) {
			work = true
		}
	}
	return work
}

func (c *Client) event(d *ring.Desc) {
	slot := int(d.Conn)
	if slot >= len(c.socks) {
		return
	}
	switch d.Op {
	case ring.OpReply:
		if d.Cookie&connectCookie != 0 {
			c.mu.Lock()
			s := c.socks[slot]
			c.mu.Unlock()
			// The cookie names the dial, not only its slot: the reply of
			// an earlier dial on a slot since freed and dialed again (the
			// reply waited in ndpd's backlog while OpSlotFree went out on
			// RX(slot)) must not fail the new one.
			if s != nil && s.dialCookie == d.Cookie && Status(d.Aux) != StatusOK {
				s.fail(fmt.Errorf("ndpd: dial %v: %w", s.remote, Status(d.Aux).Err()))
			}
			return
		}
		c.mu.Lock()
		w := c.waiters[d.Cookie]
		delete(c.waiters, d.Cookie)
		c.mu.Unlock()
		if w != nil {
			w.st = Status(d.Aux)
			w.done.Store(true)
			signalChan(w.ready)
		}
	case EvAccepted:
		remote, _ := UnpackAddr(d.Aux)
		port := uint16(d.Cookie)
		s := newClientSock(c, slot, remote, port)
		c.mu.Lock()
		c.socks[slot] = s
		l := c.listeners[port]
		c.mu.Unlock()
		if l == nil || !l.push(s) {
			s.Abort()
		}
	}
}

// rxSlot moves RX(slot) descriptors into the socket's queue.
func (c *Client) rxSlot(slot int) bool {
	rx := c.end.Sockets[slot].RX
	if !rx.Pending() {
		return false
	}
	c.mu.Lock()
	s := c.socks[slot]
	c.mu.Unlock()
	if s == nil {
		return false // accepted, but EvAccepted not seen yet
	}
	work, freed, drop := s.fill(rx)
	if freed || len(drop) > 0 {
		c.mu.Lock()
		if freed {
			c.socks[slot] = nil
			if slot < DialSlots(len(c.socks)) {
				c.dialFree = append(c.dialFree, slot)
			}
		}
		c.releaseFramesLocked(drop)
		c.mu.Unlock()
	}
	return work
}

const connectCookie = 1 << 63

// ---- API ----

// Dial opens a connection to remote (zero-RTT: it returns as soon as the
// command is on the ring; a refusal by the daemon surfaces on Read/Write).
func (c *Client) Dial(remote netip.AddrPort, opts DialOptions) (*ClientSock, error) {
	aux, ok := PackAddr(remote)
	if !ok || remote.Port() == 0 {
		return nil, fmt.Errorf("%w: %v is not an IPv4 address and port", ErrProtocol, remote)
	}
	c.mu.Lock()
	if len(c.dialFree) == 0 {
		// Closed slots come back with OpSlotFree on their RX rings: look.
		c.mu.Unlock()
		c.tryPoll()
		c.mu.Lock()
	}
	if c.dead {
		c.mu.Unlock()
		return nil, c.goneErr()
	}
	if len(c.dialFree) == 0 {
		c.mu.Unlock()
		return nil, ErrNoSlot
	}
	slot := c.dialFree[len(c.dialFree)-1]
	c.dialFree = c.dialFree[:len(c.dialFree)-1]
	s := newClientSock(c, slot, remote, 0)
	c.dials++
	s.dialCookie = connectCookie | (c.dials&(1<<31-1))<<32 | uint64(uint32(slot))
	c.socks[slot] = s
	c.mu.Unlock()
	var ds [5]ring.Desc
	cmds := opts.OptionDescs(ds[:0], uint32(slot))
	cmds = append(cmds, ring.Desc{Frame: ring.NoFrame, Conn: uint32(slot), Op: ring.OpConnect, Aux: aux, Cookie: s.dialCookie})
	if err := c.produceCmd(cmds); err != nil {
		return nil, err
	}
	return s, nil
}

// ClientListener receives the connections ndpd accepted on a port.
type ClientListener struct {
	c      *Client
	port   uint16
	q      chan *ClientSock
	ready  chan struct{} // cap 1: q got a connection
	done   chan struct{}
	closed atomic.Bool
}

// Listen asks ndpd to accept connections on port for this application.
func (c *Client) Listen(port uint16) (*ClientListener, error) {
	l := &ClientListener{c: c, port: port, q: make(chan *ClientSock, len(c.socks)), ready: make(chan struct{}, 1), done: make(chan struct{})}
	c.mu.Lock()
	if c.listeners[port] != nil {
		c.mu.Unlock()
		return nil, fmt.Errorf("ndpd: listen %d: %w", port, StatusPortInUse.Err())
	}
	c.listeners[port] = l
	c.mu.Unlock()
	st, err := c.request(ring.Desc{Frame: ring.NoFrame, Op: ring.OpListen, Aux: uint64(port)})
	if err == nil {
		err = st.Err()
	}
	if err != nil {
		c.mu.Lock()
		delete(c.listeners, port)
		c.mu.Unlock()
		return nil, fmt.Errorf("ndpd: listen %d: %w", port, err)
	}
	return l, nil
}

// Port returns the listened port.
func (l *ClientListener) Port() uint16 { return l.port }

func (l *ClientListener) push(s *ClientSock) bool {
	if l.closed.Load() {
		return false
	}
	select {
	case l.q <- s:
		signalChan(l.ready)
		return true
	default:
		return false
	}
}

// Accept returns the next accepted connection. It returns net.ErrClosed
// after Close, ErrDaemonGone when the daemon stops, os.ErrDeadlineExceeded
// when deadline (if non-zero) passes, ErrCanceled when cancel closes.
func (l *ClientListener) Accept(deadline time.Time, cancel <-chan struct{}) (*ClientSock, error) {
	for {
		select {
		case s := <-l.q:
			if len(l.q) > 0 {
				signalChan(l.ready) // another Accept may go on
			}
			return s, nil
		default:
		}
		if l.closed.Load() {
			return nil, errClosed
		}
		if err := l.c.waitFor(l.pending, l.ready, l.done, deadline, cancel); err != nil {
			return nil, err
		}
	}
}

func (l *ClientListener) pending() bool { return len(l.q) > 0 }

// Close stops listening; queued connections are aborted.
func (l *ClientListener) Close() error {
	if l.closed.Swap(true) {
		return net.ErrClosed
	}
	close(l.done)
	c := l.c
	st, err := c.request(ring.Desc{Frame: ring.NoFrame, Op: OpUnlisten, Aux: uint64(l.port)})
	c.mu.Lock()
	delete(c.listeners, l.port)
	c.mu.Unlock()
	for {
		select {
		case s := <-l.q:
			s.Abort()
			continue
		default:
		}
		break
	}
	if err != nil {
		return err
	}
	return st.Err()
}

var (
	errDeadline = os.ErrDeadlineExceeded
	errClosed   = net.ErrClosed
	// ErrCanceled: the caller's cancel channel closed while waiting.
	ErrCanceled = errors.New("ndpd: canceled")
)
