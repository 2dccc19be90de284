package ring

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/bits"
)

// Region layout, version 1. Every field lives at an explicit byte offset;
// nothing in shared memory is a Go struct. Multi-byte fields are
// little-endian; the index words and sleep flags are accessed with
// sync/atomic and so are in native order, which is why the package only
// supports little-endian machines (amd64, arm64, riscv64, ...).
//
//	offset  size  field
//	     0     4  magic          Magic ("NDPR")
//	     4     4  version        Version
//	     8     4  headerLen      bytes from 0 to the end of the ring table
//	    12     4  crc            CRC-32C of [0,128) (crc field as zero) and of the ring table
//	    16     8  regionSize     total bytes of the memfd
//	    24     4  descSize       DescSize (32)
//	    28     4  ringCount      4 + 2*sockets
//	    32     4  sockets        socket slots in this region
//	    36     4  app            AppID the daemon assigned
//	    40     4  frameSize      bytes per frame of the buffer area
//	    44     4  bufferFrames   frames in the buffer area (the app maps frameSize*bufferFrames)
//	    48     4  partFirst      first frame of the app's TX partition
//	    52     4  partCount      frames in the app's TX partition
//	    56    72  reserved       zero
//	   128     4  daemonSleeping sleep flag, written only by the daemon (own 128-byte line)
//	   256     4  appSleeping    sleep word, written only by the app (own 128-byte line; ndpd's
//	                             client keeps counts in it, internal/daemon/proto.go)
//	   384  16*n  ring table     n = ringCount entries:
//	                                0 uint64 offset of the ring block
//	                                8 uint32 slots (power of two)
//	                               12 uint8  kind (RingKind)
//	                               13 uint8  producer side (Side)
//	                               14 uint16 socket index (0 for per-app rings)
//	headerLen...                 ring blocks, each 128-byte aligned:
//	                                0 uint64 producer index (own 128-byte line; written by the producer only)
//	                              128 uint64 consumer index (own 128-byte line; written by the consumer only)
//	                              256 slots*DescSize descriptors
//
// Indices are free-running uint64 counters; slot = index & (slots-1).
// 128-byte spacing rather than 64 keeps the two index words out of each
// other's way even with the adjacent-line prefetcher of x86 parts.
//
// Ring table order is fixed: cmd, event, completion, release, then for each
// socket s: RX, TX. The parser insists on that order, on ascending,
// non-overlapping, aligned blocks inside the region, and on the checksum.
const (
	Magic   uint32 = 0x5250444e // "NDPR" in little-endian byte order
	Version uint32 = 2

	hdrMagic        = 0
	hdrVersion      = 4
	hdrHeaderLen    = 8
	hdrCRC          = 12
	hdrRegionSize   = 16
	hdrDescSize     = 24
	hdrRingCount    = 28
	hdrSockets      = 32
	hdrApp          = 36
	hdrFrameSize    = 40
	hdrBufferFrames = 44
	hdrPartFirst    = 48
	hdrPartCount    = 52
	hdrReserved     = 56
	hdrFixedLen     = 128

	hdrDaemonSleeping = 128
	hdrAppSleeping    = 256
	hdrRingTable      = 384
	ringEntrySize     = 16

	// lineSize is the spacing between words written by different sides.
	lineSize = 128

	ringProducerOff = 0
	ringConsumerOff = lineSize
	ringDescOff     = 2 * lineSize

	// MaxSockets bounds the socket slots of one region.
	MaxSockets = 4096
	// MinSlots and MaxSlots bound the slots of one ring.
	MinSlots = 2
	MaxSlots = 1 << 20
	// MinFrameSize and MaxFrameSize bound the frame size (Off and Len are uint16).
	MinFrameSize = 64
	MaxFrameSize = 1 << 16
)

// Side names one end of a region: the daemon (core process) or the application.
type Side uint8

const (
	SideDaemon Side = 1
	SideApp    Side = 2
)

func (s Side) String() string {
	switch s {
	case SideDaemon:
		return "daemon"
	case SideApp:
		return "app"
	}
	return "unknown-side"
}

// RingKind names the role of a ring in a region.
type RingKind uint8

const (
	// KindCmd carries commands (connect, listen, close) app → daemon.
	KindCmd RingKind = 1
	// KindEvent carries replies and notifications daemon → app.
	KindEvent RingKind = 2
	// KindCompletion returns TX frames daemon → app once the daemon is done
	// with them (AF_XDP's completion ring, one level up).
	KindCompletion RingKind = 3
	// KindRelease returns RX frames app → daemon once the app has read them
	// (AF_XDP's fill ring, one level up).
	KindRelease RingKind = 4
	// KindRX carries received data of one socket daemon → app; the frames are
	// daemon frames lent to the app.
	KindRX RingKind = 5
	// KindTX carries data to send of one socket app → daemon; the frames are
	// the app's own partition.
	KindTX RingKind = 6
)

func (k RingKind) String() string {
	switch k {
	case KindCmd:
		return "cmd"
	case KindEvent:
		return "event"
	case KindCompletion:
		return "completion"
	case KindRelease:
		return "release"
	case KindRX:
		return "rx"
	case KindTX:
		return "tx"
	}
	return "unknown-kind"
}

// producerOf is the fixed direction of each ring kind.
func producerOf(k RingKind) Side {
	switch k {
	case KindCmd, KindRelease, KindTX:
		return SideApp
	default:
		return SideDaemon
	}
}

// RingSpec is one validated ring-table entry.
type RingSpec struct {
	Kind     RingKind
	Producer Side
	Socket   int    // socket index for RX/TX, 0 otherwise
	Offset   uint64 // byte offset of the ring block in the region
	Slots    uint32 // power of two
}

// blockSize is the size of a ring block of the given slot count, rounded to a line.
func blockSize(slots uint32) uint64 {
	n := uint64(ringDescOff) + uint64(slots)*DescSize
	return (n + lineSize - 1) &^ (lineSize - 1)
}

// Layout is the private, validated description of a region: what the daemon
// wrote, or what the application parsed out of the header. Neither side
// re-reads the header from shared memory after mapping, so a peer that
// scribbles on the header later changes nothing.
type Layout struct {
	Size         uint64 // region bytes
	App          AppID
	Sockets      int
	FrameSize    uint32
	BufferFrames uint32
	Part         Partition // the app's TX partition
	Rings        []RingSpec
	headerLen    uint32
}

// ringIndex is the position in Rings of a ring kind (socket for RX/TX).
func ringIndex(k RingKind, socket int) int {
	switch k {
	case KindCmd, KindEvent, KindCompletion, KindRelease:
		return int(k) - 1
	default:
		return 4 + 2*socket + int(k-KindRX)
	}
}

func expectedRing(i int) (RingKind, int) {
	if i < 4 {
		return RingKind(i + 1), 0
	}
	return KindRX + RingKind((i-4)%2), (i - 4) / 2
}

func isPow2(v uint32) bool { return v != 0 && v&(v-1) == 0 }

func nextPow2(v uint32) uint32 {
	if v <= 1 {
		return 1
	}
	return 1 << (32 - bits.LeadingZeros32(v-1))
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// headerCRC computes the checksum of a header: the fixed part with the crc
// field read as zero, then the ring table.
func headerCRC(b []byte, ringCount int) uint32 {
	var zero [4]byte
	c := crc32.Update(0, castagnoli, b[:hdrCRC])
	c = crc32.Update(c, castagnoli, zero[:])
	c = crc32.Update(c, castagnoli, b[hdrCRC+4:hdrFixedLen])
	return crc32.Update(c, castagnoli, b[hdrRingTable:hdrRingTable+ringCount*ringEntrySize])
}

// encodeHeader writes l into the start of a zeroed region b.
func encodeHeader(b []byte, l *Layout) {
	le := binary.LittleEndian
	le.PutUint32(b[hdrMagic:], Magic)
	le.PutUint32(b[hdrVersion:], Version)
	le.PutUint32(b[hdrHeaderLen:], l.headerLen)
	le.PutUint64(b[hdrRegionSize:], l.Size)
	le.PutUint32(b[hdrDescSize:], DescSize)
	le.PutUint32(b[hdrRingCount:], uint32(len(l.Rings)))
	le.PutUint32(b[hdrSockets:], uint32(l.Sockets))
	le.PutUint32(b[hdrApp:], uint32(l.App))
	le.PutUint32(b[hdrFrameSize:], l.FrameSize)
	le.PutUint32(b[hdrBufferFrames:], l.BufferFrames)
	le.PutUint32(b[hdrPartFirst:], l.Part.First)
	le.PutUint32(b[hdrPartCount:], l.Part.Count)
	for i, r := range l.Rings {
		e := b[hdrRingTable+i*ringEntrySize:]
		le.PutUint64(e[0:], r.Offset)
		le.PutUint32(e[8:], r.Slots)
		e[12] = byte(r.Kind)
		e[13] = byte(r.Producer)
		le.PutUint16(e[14:], uint16(r.Socket))
	}
	le.PutUint32(b[hdrCRC:], headerCRC(b, len(l.Rings)))
}

// ParseHeader validates the header at the start of region b (the whole
// mapping, len(b) is the region size) and returns its layout. It never
// panics: any inconsistency is a *HeaderError matching ErrBadHeader (or
// ErrVersion). On success every ring block lies inside b, aligned,
// ascending and non-overlapping, so the caller may slice b with it.
func ParseHeader(b []byte) (Layout, error) {
	le := binary.LittleEndian
	if len(b) < hdrRingTable {
		return Layout{}, headerErr("size", "region of %d bytes is smaller than the %d-byte header", len(b), hdrRingTable)
	}
	if m := le.Uint32(b[hdrMagic:]); m != Magic {
		return Layout{}, headerErr("magic", "got %#08x, want %#08x", m, Magic)
	}
	if v := le.Uint32(b[hdrVersion:]); v != Version {
		return Layout{}, &HeaderError{Field: "version", Reason: fmt.Sprintf("got %d, want %d", v, Version), Version: true}
	}
	if ds := le.Uint32(b[hdrDescSize:]); ds != DescSize {
		return Layout{}, headerErr("descSize", "got %d, want %d", ds, DescSize)
	}
	sockets := le.Uint32(b[hdrSockets:])
	if sockets > MaxSockets {
		return Layout{}, headerErr("sockets", "%d exceeds %d", sockets, MaxSockets)
	}
	ringCount := le.Uint32(b[hdrRingCount:])
	if ringCount != 4+2*sockets {
		return Layout{}, headerErr("ringCount", "got %d, want %d for %d sockets", ringCount, 4+2*sockets, sockets)
	}
	tableEnd := uint64(hdrRingTable) + uint64(ringCount)*ringEntrySize
	headerLen := le.Uint32(b[hdrHeaderLen:])
	if uint64(headerLen) < tableEnd || uint64(headerLen) > uint64(len(b)) || headerLen%lineSize != 0 {
		return Layout{}, headerErr("headerLen", "%d is not a line-aligned length in [%d, %d]", headerLen, tableEnd, len(b))
	}
	if size := le.Uint64(b[hdrRegionSize:]); size != uint64(len(b)) {
		return Layout{}, headerErr("regionSize", "header says %d bytes, mapping has %d", size, len(b))
	}
	if got, want := le.Uint32(b[hdrCRC:]), headerCRC(b, int(ringCount)); got != want {
		return Layout{}, headerErr("crc", "got %#08x, computed %#08x", got, want)
	}
	for i := hdrReserved; i < hdrFixedLen; i++ {
		if b[i] != 0 {
			return Layout{}, headerErr("reserved", "byte %d is %#x, want 0", i, b[i])
		}
	}
	l := Layout{
		Size:         uint64(len(b)),
		App:          AppID(le.Uint32(b[hdrApp:])),
		Sockets:      int(sockets),
		FrameSize:    le.Uint32(b[hdrFrameSize:]),
		BufferFrames: le.Uint32(b[hdrBufferFrames:]),
		Part:         Partition{First: le.Uint32(b[hdrPartFirst:]), Count: le.Uint32(b[hdrPartCount:])},
		headerLen:    headerLen,
	}
	if l.FrameSize < MinFrameSize || l.FrameSize > MaxFrameSize {
		return Layout{}, headerErr("frameSize", "%d outside [%d, %d]", l.FrameSize, MinFrameSize, MaxFrameSize)
	}
	if uint64(l.Part.First)+uint64(l.Part.Count) > uint64(l.BufferFrames) {
		return Layout{}, headerErr("partition", "frames [%d, +%d) exceed the %d-frame buffer area", l.Part.First, l.Part.Count, l.BufferFrames)
	}
	l.Rings = make([]RingSpec, ringCount)
	prevEnd := uint64(headerLen)
	for i := range l.Rings {
		e := b[hdrRingTable+i*ringEntrySize:]
		r := RingSpec{
			Offset:   le.Uint64(e[0:]),
			Slots:    le.Uint32(e[8:]),
			Kind:     RingKind(e[12]),
			Producer: Side(e[13]),
			Socket:   int(le.Uint16(e[14:])),
		}
		wantKind, wantSocket := expectedRing(i)
		switch {
		case r.Kind != wantKind || r.Socket != wantSocket:
			return Layout{}, headerErr(fmt.Sprintf("ring[%d]", i)+".kind", "got %v/socket %d, want %v/socket %d", r.Kind, r.Socket, wantKind, wantSocket)
		case r.Producer != producerOf(r.Kind):
			return Layout{}, headerErr(fmt.Sprintf("ring[%d]", i)+".producer", "got %v, want %v", r.Producer, producerOf(r.Kind))
		case !isPow2(r.Slots) || r.Slots < MinSlots || r.Slots > MaxSlots:
			return Layout{}, headerErr(fmt.Sprintf("ring[%d]", i)+".slots", "%d is not a power of two in [%d, %d]", r.Slots, MinSlots, MaxSlots)
		case r.Offset%lineSize != 0 || r.Offset < prevEnd:
			return Layout{}, headerErr(fmt.Sprintf("ring[%d]", i)+".offset", "%d is unaligned or overlaps the previous block (ends at %d)", r.Offset, prevEnd)
		case r.Offset > l.Size || blockSize(r.Slots) > l.Size-r.Offset:
			return Layout{}, headerErr(fmt.Sprintf("ring[%d]", i)+".offset", "block [%d, +%d) exceeds the %d-byte region", r.Offset, blockSize(r.Slots), l.Size)
		}
		prevEnd = r.Offset + blockSize(r.Slots)
		l.Rings[i] = r
	}
	return l, nil
}

// RegionConfig sizes a region. The zero value is valid: every zero field
// takes the default written next to it.
type RegionConfig struct {
	// Sockets is the number of socket slots (each with an RX and a TX ring).
	// Default 16; at most MaxSockets.
	Sockets int
	// CmdSlots and EventSlots size the command and event rings. Default 256.
	CmdSlots   uint32
	EventSlots uint32
	// SocketSlots sizes each socket's RX and TX rings. Default 256.
	SocketSlots uint32
	// CompletionSlots sizes the TX-completion ring. Default: the partition
	// size rounded up to a power of two (minimum 64), so the daemon can always
	// hand back every frame of the partition at once.
	CompletionSlots uint32
	// ReleaseSlots sizes the RX-release ring. Default 4096.
	ReleaseSlots uint32
}

// populate fills defaults; validate checks the result.
func (c RegionConfig) populate(partCount uint32) RegionConfig {
	if c.Sockets == 0 {
		c.Sockets = 16
	}
	if c.CmdSlots == 0 {
		c.CmdSlots = 256
	}
	if c.EventSlots == 0 {
		c.EventSlots = 256
	}
	if c.SocketSlots == 0 {
		c.SocketSlots = 256
	}
	if c.CompletionSlots == 0 {
		c.CompletionSlots = max(64, nextPow2(partCount))
	}
	if c.ReleaseSlots == 0 {
		c.ReleaseSlots = 4096
	}
	return c
}

func (c RegionConfig) validate() error {
	if c.Sockets < 0 || c.Sockets > MaxSockets {
		return configErr("Sockets", "%d outside [0, %d]", c.Sockets, MaxSockets)
	}
	for _, f := range []struct {
		name string
		v    uint32
	}{{"CmdSlots", c.CmdSlots}, {"EventSlots", c.EventSlots}, {"SocketSlots", c.SocketSlots}, {"CompletionSlots", c.CompletionSlots}, {"ReleaseSlots", c.ReleaseSlots}} {
		if !isPow2(f.v) || f.v < MinSlots || f.v > MaxSlots {
			return configErr(f.name, "%d is not a power of two in [%d, %d]", f.v, MinSlots, MaxSlots)
		}
	}
	return nil
}

// BufferGeometry tells the application what it maps besides the region: the
// buffer area's frame size and frame count, and which frames are its TX
// partition.
type BufferGeometry struct {
	FrameSize uint32
	Frames    uint32
	Part      Partition
}

// NewLayout computes the layout of a region for cfg (defaults applied).
func NewLayout(cfg RegionConfig, app AppID, geo BufferGeometry) (Layout, error) {
	cfg = cfg.populate(geo.Part.Count)
	if err := cfg.validate(); err != nil {
		return Layout{}, err
	}
	if geo.FrameSize < MinFrameSize || geo.FrameSize > MaxFrameSize {
		return Layout{}, configErr("FrameSize", "%d outside [%d, %d]", geo.FrameSize, MinFrameSize, MaxFrameSize)
	}
	if uint64(geo.Part.First)+uint64(geo.Part.Count) > uint64(geo.Frames) {
		return Layout{}, configErr("Part", "frames [%d, +%d) exceed the %d-frame buffer area", geo.Part.First, geo.Part.Count, geo.Frames)
	}
	n := 4 + 2*cfg.Sockets
	l := Layout{
		App:          app,
		Sockets:      cfg.Sockets,
		FrameSize:    geo.FrameSize,
		BufferFrames: geo.Frames,
		Part:         geo.Part,
		Rings:        make([]RingSpec, n),
	}
	off := uint64(hdrRingTable + n*ringEntrySize)
	off = (off + lineSize - 1) &^ (lineSize - 1)
	l.headerLen = uint32(off)
	for i := range l.Rings {
		k, s := expectedRing(i)
		var slots uint32
		switch k {
		case KindCmd:
			slots = cfg.CmdSlots
		case KindEvent:
			slots = cfg.EventSlots
		case KindCompletion:
			slots = cfg.CompletionSlots
		case KindRelease:
			slots = cfg.ReleaseSlots
		default:
			slots = cfg.SocketSlots
		}
		l.Rings[i] = RingSpec{Kind: k, Producer: producerOf(k), Socket: s, Offset: off, Slots: slots}
		off += blockSize(slots)
	}
	// Round the region to whole pages so the memfd maps cleanly.
	const page = 4096
	l.Size = (off + page - 1) &^ (page - 1)
	return l, nil
}
