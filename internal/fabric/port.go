package fabric

import (
	"errors"
	"fmt"

	"github.com/ndpstack/ndpstack/ndp"
)

// TrimPolicy says which data packet a full data queue trims.
type TrimPolicy uint8

const (
	// TrimRandom trims the arriving packet or the packet at the tail of the data queue
	// with probability 1/2 each (the paper's rule: it breaks up phase effects).
	TrimRandom TrimPolicy = iota
	// TrimArrival always trims the arriving packet (Cut Payload's rule).
	TrimArrival
	// TrimTail always trims the packet at the tail of the data queue.
	TrimTail
)

// Config configures a Port. The zero value is the NDP paper's switch.
type Config struct {
	// DataQueue is the data queue's capacity in packets. Zero means 8.
	DataQueue int
	// HeaderQueueBytes is the header queue's capacity in bytes. Zero means
	// DataQueue × 9000: the same memory as eight jumbo frames, which holds about
	// 1125 64-byte headers (paper section 3.2.4).
	HeaderQueueBytes int
	// WRRHeaders is how many header-queue frames the port sends for each data frame
	// while both queues are backlogged. Zero means 10.
	WRRHeaders int
	// Trim chooses between trimming the arrival or the tail. Zero is TrimRandom.
	Trim TrimPolicy
	// NoReturnToSender drops trimmed headers that overflow the header queue instead of
	// bouncing them to their sender.
	NoReturnToSender bool
	// PhantomRate is the drain rate of the HULL phantom queue in bits per second
	// (typically γ × link rate). Zero disables the phantom queue.
	PhantomRate float64
	// PhantomThreshold is the phantom queue depth, in bytes, above which departing
	// frames are marked CE. Zero means 3000 bytes (HULL's 1 KB-3 KB range, top end).
	PhantomThreshold int
	// Seed seeds the trim coin. Ports with equal seeds make equal choices.
	Seed uint64
	// Trimmer, when set, replaces NDP's parsing in the port's admission: which
	// frames are data the port may trim, which go to the header queue, and how
	// a data frame is trimmed. A commodity switch that classifies by DSCP and
	// cuts frames to a fixed size (internal/softswitch) supplies one. A port
	// with a Trimmer never returns a frame to its sender (its frames are not
	// known to be NDP's). Nil means NDP's (ndp.IsTrimmable, ndp.IsControl,
	// ndp.TrimFrame): the NDP-aware switch.
	Trimmer Trimmer
}

// Trimmer is a Port's admission classification and trimming for frames the
// switch does not parse as NDP (Config.Trimmer).
type Trimmer interface {
	// Trimmable reports whether frame is a data frame the port may trim.
	Trimmable(frame []byte) bool
	// Control reports whether a frame that is not trimmable belongs in the
	// header queue; any other frame is tail-dropped when the data queue is full.
	Control(frame []byte) bool
	// Trim cuts a trimmable frame in place and returns its new length.
	Trim(frame []byte) (int, error)
}

// ErrConfig is returned (wrapped) for an invalid Config.
var ErrConfig = errors.New("fabric: invalid config")

func (c *Config) populate() error {
	if c.DataQueue == 0 {
		c.DataQueue = 8
	}
	if c.HeaderQueueBytes == 0 {
		c.HeaderQueueBytes = c.DataQueue * 9000
	}
	if c.WRRHeaders == 0 {
		c.WRRHeaders = 10
	}
	if c.PhantomThreshold == 0 {
		c.PhantomThreshold = 3000
	}
	switch {
	case c.DataQueue < 1:
		return fmt.Errorf("%w: DataQueue %d < 1", ErrConfig, c.DataQueue)
	case c.HeaderQueueBytes < 64:
		return fmt.Errorf("%w: HeaderQueueBytes %d < 64", ErrConfig, c.HeaderQueueBytes)
	case c.WRRHeaders < 1:
		return fmt.Errorf("%w: WRRHeaders %d < 1", ErrConfig, c.WRRHeaders)
	case c.Trim > TrimTail:
		return fmt.Errorf("%w: unknown TrimPolicy %d", ErrConfig, c.Trim)
	case c.PhantomRate < 0:
		return fmt.Errorf("%w: PhantomRate %v < 0", ErrConfig, c.PhantomRate)
	}
	return nil
}

// Verdict is what Enqueue did with the arriving frame.
type Verdict uint8

const (
	// Queued: the frame waits in the data or header queue as it arrived.
	Queued Verdict = iota
	// QueuedTrimmed: the frame was trimmed to its header and waits in the header queue.
	QueuedTrimmed
	// Bounced: the frame was trimmed, found the header queue full and was turned into a
	// return-to-sender header; the caller routes it back toward its new destination.
	Bounced
	// Dropped: the frame was dropped (a control frame or bounced header that found the
	// header queue full, an unparseable frame, or return-to-sender disabled). The frame's
	// buffer is the caller's again.
	Dropped
)

func (v Verdict) String() string {
	switch v {
	case Queued:
		return "queued"
	case QueuedTrimmed:
		return "trimmed"
	case Bounced:
		return "bounced"
	case Dropped:
		return "dropped"
	}
	return fmt.Sprintf("Verdict(%d)", uint8(v))
}

// Stats counts what a Port did.
type Stats struct {
	Arrivals       uint64 // frames offered to Enqueue
	Departures     uint64 // frames returned by Dequeue
	DepartureBytes uint64
	Trimmed        uint64 // data frames trimmed (arrival or tail)
	TrimmedTail    uint64 // of which the tail of the data queue
	Bounced        uint64 // trimmed headers returned to sender
	Dropped        uint64 // frames dropped
	MaxDataDepth   int    // most data frames queued at once
	MaxHeaderBytes int    // most header-queue bytes at once
	PhantomMarks   uint64 // frames marked CE by the phantom queue
}

// Port is one switch output port. It is not safe for concurrent use: one goroutine
// (the switch's or the simulator's) owns it.
type Port struct {
	cfg Config

	data    fifo // data frames
	headers fifo // header queue: headers, ACK, NACK, PULL, trimmed and bounced frames
	hdrB    int  // bytes in the header queue
	dataB   int  // bytes in the data queue

	wrrCredit int // header frames still allowed before a data frame must go

	phantom     float64 // phantom queue depth in bytes
	phantomLast ndp.Time

	rng   uint64
	stats Stats
}

// NewPort returns a Port for cfg (zero fields take their documented defaults).
func NewPort(cfg Config) (*Port, error) {
	if err := cfg.populate(); err != nil {
		return nil, err
	}
	p := &Port{cfg: cfg, rng: cfg.Seed*0x9E3779B97F4A7C15 + 0x2545F4914F6CDD1D}
	p.data.init(cfg.DataQueue)
	p.headers.init(64)
	p.wrrCredit = cfg.WRRHeaders
	return p, nil
}

// Config returns the port's configuration with defaults filled in.
func (p *Port) Config() Config { return p.cfg }

// Stats returns the port's counters.
func (p *Port) Stats() Stats { return p.stats }

// Len reports the frames queued in the data and header queues.
func (p *Port) Len() (data, headers int) { return p.data.len(), p.headers.len() }

// Bytes reports the bytes queued in the data and header queues.
func (p *Port) Bytes() (data, headers int) { return p.dataB, p.hdrB }

// Empty reports whether Dequeue would return nothing.
func (p *Port) Empty() bool { return p.data.len() == 0 && p.headers.len() == 0 }

// coin returns true with probability 1/2 (xorshift64*).
func (p *Port) coin() bool {
	p.rng ^= p.rng >> 12
	p.rng ^= p.rng << 25
	p.rng ^= p.rng >> 27
	return (p.rng*0x2545F4914F6CDD1D)>>63 == 1
}

// Enqueue offers an arriving frame to the port. On Queued and QueuedTrimmed the port
// owns frame (possibly shortened: the queued slice is what Dequeue returns). On Bounced
// the returned slice is the bounced header to route back; on Dropped the frame is the
// caller's again. bounced is non-nil when trimming the tail of the data queue produced
// a return-to-sender header (while the arrival itself was queued): the caller routes it
// back as it would a Bounced verdict. dropped is non-nil when such a tail header had to
// be dropped instead; its buffer is the caller's again.
func (p *Port) Enqueue(frame []byte, now ndp.Time) (v Verdict, out []byte, bounced, dropped []byte) {
	p.stats.Arrivals++
	trimmable := p.trimmable(frame)
	if !trimmable && p.control(frame) {
		// Header-only frames (ACK, NACK, PULL, RESET, trimmed or bounced headers) go to
		// the priority queue; if it is full they are lost (RTO or the next PULL covers
		// them).
		if p.hdrB+len(frame) > p.cfg.HeaderQueueBytes {
			p.stats.Dropped++
			return Dropped, frame, nil, nil
		}
		p.pushHeader(frame)
		return Queued, frame, nil, nil
	}
	if !trimmable && p.data.len() >= p.cfg.DataQueue {
		// Not NDP (or nothing to trim): tail drop, as a plain switch would.
		p.stats.Dropped++
		return Dropped, frame, nil, nil
	}
	if p.data.len() < p.cfg.DataQueue {
		p.data.push(frame)
		p.dataB += len(frame)
		if d := p.data.len(); d > p.stats.MaxDataDepth {
			p.stats.MaxDataDepth = d
		}
		return Queued, frame, nil, nil
	}
	// The data queue is full: trim the arrival or the tail.
	trimTail := p.cfg.Trim == TrimTail || (p.cfg.Trim == TrimRandom && p.coin())
	if trimTail && p.trimmable(p.data.peekTail()) {
		tail := p.data.popTail()
		p.data.push(frame)
		p.dataB += len(frame) - len(tail)
		p.stats.TrimmedTail++
		v, h := p.trimToHeaders(tail)
		switch v {
		case Bounced:
			return Queued, frame, h, nil
		case Dropped:
			return Queued, frame, nil, h
		}
		return Queued, frame, nil, nil
	}
	v, h := p.trimToHeaders(frame)
	return v, h, nil, nil
}

// trimToHeaders trims a data frame and queues its header, bouncing or dropping it when
// the header queue is full.
func (p *Port) trimToHeaders(frame []byte) (Verdict, []byte) {
	n, err := p.trim(frame)
	if err != nil {
		p.stats.Dropped++
		return Dropped, frame
	}
	frame = frame[:n]
	p.stats.Trimmed++
	if p.hdrB+n <= p.cfg.HeaderQueueBytes {
		p.pushHeader(frame)
		return QueuedTrimmed, frame
	}
	if p.cfg.NoReturnToSender || p.cfg.Trimmer != nil || ndp.BounceFrame(frame) != nil {
		p.stats.Dropped++
		return Dropped, frame
	}
	p.stats.Bounced++
	return Bounced, frame
}

func (p *Port) trimmable(f []byte) bool {
	if p.cfg.Trimmer != nil {
		return p.cfg.Trimmer.Trimmable(f)
	}
	return ndp.IsTrimmable(f)
}

func (p *Port) control(f []byte) bool {
	if p.cfg.Trimmer != nil {
		return p.cfg.Trimmer.Control(f)
	}
	return ndp.IsControl(f)
}

func (p *Port) trim(f []byte) (int, error) {
	if p.cfg.Trimmer != nil {
		return p.cfg.Trimmer.Trim(f)
	}
	return ndp.TrimFrame(f)
}

func (p *Port) pushHeader(frame []byte) {
	p.headers.push(frame)
	p.hdrB += len(frame)
	if p.hdrB > p.stats.MaxHeaderBytes {
		p.stats.MaxHeaderBytes = p.hdrB
	}
}

// Dequeue returns the next frame to send on the port's link, serving the header queue
// and the data queue weighted round robin (WRRHeaders : 1) while both are backlogged.
func (p *Port) Dequeue(now ndp.Time) ([]byte, bool) {
	var f []byte
	switch {
	case p.headers.len() > 0 && (p.wrrCredit > 0 || p.data.len() == 0):
		f = p.headers.pop()
		p.hdrB -= len(f)
		if p.wrrCredit > 0 {
			p.wrrCredit--
		}
	case p.data.len() > 0:
		f = p.data.pop()
		p.dataB -= len(f)
		p.wrrCredit = p.cfg.WRRHeaders
	default:
		return nil, false
	}
	p.stats.Departures++
	p.stats.DepartureBytes += uint64(len(f))
	if p.cfg.PhantomRate > 0 {
		p.phantomDepart(f, now)
	}
	return f, true
}

// phantomDepart drains the phantom queue to now, marks f CE when the phantom queue is
// over its threshold, then adds f's bytes.
func (p *Port) phantomDepart(f []byte, now ndp.Time) {
	if dt := now - p.phantomLast; dt > 0 {
		p.phantom -= p.cfg.PhantomRate / 8 * float64(dt) / 1e9
		if p.phantom < 0 {
			p.phantom = 0
		}
	}
	p.phantomLast = now
	if p.phantom > float64(p.cfg.PhantomThreshold) && markCE(f) {
		p.stats.PhantomMarks++
	}
	p.phantom += float64(len(f))
}

// PhantomDepth reports the phantom queue's depth in bytes as of its last update.
func (p *Port) PhantomDepth() float64 { return p.phantom }

// markCE sets ECN CE on an IPv4 frame that is ECN-capable or already marked, fixing the
// header checksum incrementally (RFC 1624). It reports whether the frame carries CE.
func markCE(f []byte) bool {
	const ipOff = 14
	if len(f) < ipOff+20 || f[12] != 0x08 || f[13] != 0x00 || f[ipOff]>>4 != 4 {
		return false
	}
	tos := f[ipOff+1]
	if tos&3 == 3 {
		return true
	}
	ndp.SetIPv4Word(f[ipOff:], 0, uint16(f[ipOff])<<8|uint16(tos|3))
	return true
}
