// Package capture writes the frames a stack sends and receives to a pcapng
// file that Wireshark and tshark open (contrib/wireshark/ndp.lua decodes
// the NDP header).
//
// The data path never waits for the disk. Frames copies each frame into a
// chunk of a fixed set of chunks (Config.Buffer bytes in all) and hands the
// filled chunk, once per call, to a writer goroutine over a channel whose
// capacity is the number of chunks, so the hand-off never blocks. When every
// chunk is waiting for the disk, frames are dropped and counted
// (Stats.Dropped). The file is bounded: once writing a frame would take it
// past Config.MaxBytes the writer stops and counts every later frame as
// Stats.Truncated (it does not rotate: the start of a run is what one
// debugs, and a bounded single file is what one attaches to a bug report).
//
//	caller (stack's lock held)            writer goroutine
//	Frames(batch, dir) -- copy --> chunk --full--> pcapng.WritePacket --> file
//	                    <-------- free chunk -------
//
// A stack with no capture holds a nil *Writer and pays one nil check per
// batch.
//
// The file has two pcapng interfaces: 0 "rx" (frames received) and 1 "tx"
// (frames sent), so `frame.interface_id` tells the direction.
package capture

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

// Direction of a captured frame: its pcapng interface index.
type Direction int

const (
	RX Direction = 0 // frames the stack received
	TX Direction = 1 // frames the stack sent
)

// Config sizes a Writer. The zero value takes every default.
type Config struct {
	// MaxBytes bounds the file. When the next frame would take the file
	// past it, capture stops (later frames count as Truncated). Default
	// 64 MiB; at least 64 KiB.
	MaxBytes int64
	// Buffer is the memory frames are copied into before the writer
	// goroutine writes them, split into 16 chunks. Default 4 MiB; at
	// least 16 x (SnapLen + 16).
	Buffer int
	// SnapLen is the most bytes kept of one frame. Default 65535.
	SnapLen int
	// Name is written into the file's interface descriptions ("NAME rx",
	// "NAME tx"). Default "ndp".
	Name string
}

const (
	chunks    = 16
	recHeader = 16 // per record in a chunk: timestamp (8), direction (2), captured length (2), wire length (4)
)

func (c *Config) populate() {
	if c.MaxBytes == 0 {
		c.MaxBytes = 64 << 20
	}
	if c.SnapLen == 0 {
		c.SnapLen = 65535
	}
	if c.Buffer == 0 {
		c.Buffer = 4 << 20
	}
	if c.Name == "" {
		c.Name = "ndp"
	}
}

func (c *Config) validate() error {
	if c.MaxBytes < 64<<10 {
		return fmt.Errorf("capture: max bytes %d < 64 KiB", c.MaxBytes)
	}
	if c.SnapLen < 64 || c.SnapLen > 65535 {
		return fmt.Errorf("capture: snap length %d outside [64, 65535]", c.SnapLen)
	}
	if c.Buffer < chunks*(c.SnapLen+recHeader) {
		return fmt.Errorf("capture: buffer %d < 16 x (snap length %d + %d)", c.Buffer, c.SnapLen, recHeader)
	}
	return nil
}

// Stats are a Writer's counters.
type Stats struct {
	Frames    uint64 // frames written to the file
	Bytes     uint64 // bytes of the file so far
	Dropped   uint64 // frames dropped because every chunk was waiting for the disk
	Truncated uint64 // frames not written because the file reached MaxBytes (or a write failed: Close returns the error)
}

// Writer captures frames into a pcapng file. Frames and Close must not run
// concurrently with each other or themselves (a stack calls Frames under
// its lock and Close after it stopped); Stats may be called from any
// goroutine.
type Writer struct {
	cfg   Config
	free  chan []byte // empty chunks
	full  chan []byte // chunks for the writer goroutine
	cur   []byte      // chunk being filled by Frames (nil: none)
	limit int         // chunk capacity

	closeOnce sync.Once
	closed    bool // Close ran: Frames drops everything (same goroutine contract as Frames)
	done      chan struct{}
	err       error // the writer goroutine's first error (read after done)
	file      io.Closer

	frames, bytes, dropped, truncated atomic.Uint64
}

// Create opens path (truncating it) and starts a Writer on it.
func Create(path string, cfg Config) (*Writer, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	w, err := New(f, cfg)
	if err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	w.file = f
	return w, nil
}

// New starts a Writer on out (Close does not close out).
func New(out io.Writer, cfg Config) (*Writer, error) {
	cfg.populate()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cw := &countingWriter{w: out}
	ng, err := pcapgo.NewNgWriterInterface(cw, pcapgo.NgInterface{
		Name: cfg.Name + " rx", LinkType: layers.LinkTypeEthernet, SnapLength: uint32(cfg.SnapLen), TimestampResolution: 9,
	}, pcapgo.NgWriterOptions{SectionInfo: pcapgo.NgSectionInfo{Application: "ndpstack"}})
	if err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	if _, err := ng.AddInterface(pcapgo.NgInterface{
		Name: cfg.Name + " tx", LinkType: layers.LinkTypeEthernet, SnapLength: uint32(cfg.SnapLen), TimestampResolution: 9,
	}); err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	if err := ng.Flush(); err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	w := &Writer{
		cfg:   cfg,
		free:  make(chan []byte, chunks),
		full:  make(chan []byte, chunks),
		limit: cfg.Buffer / chunks,
		done:  make(chan struct{}),
	}
	for range chunks {
		w.free <- make([]byte, 0, w.limit)
	}
	w.bytes.Store(uint64(cw.n))
	go w.run(ng, cw)
	return w, nil
}

// Frames copies frames (one batch, all in direction dir) for the writer
// goroutine. It never blocks: frames that find no free chunk are dropped
// and counted. It allocates nothing.
func (w *Writer) Frames(frames [][]byte, dir Direction) {
	if len(frames) == 0 {
		return
	}
	if w.closed {
		w.dropped.Add(uint64(len(frames)))
		return
	}
	now := time.Now().UnixNano()
	for _, f := range frames {
		capLen := min(len(f), w.cfg.SnapLen)
		need := recHeader + capLen
		if w.cur != nil && len(w.cur)+need > w.limit {
			w.handOff()
		}
		if w.cur == nil {
			select {
			case w.cur = <-w.free:
			default:
				w.dropped.Add(1)
				continue
			}
		}
		n := len(w.cur)
		w.cur = w.cur[:n+need]
		rec := w.cur[n:]
		binary.LittleEndian.PutUint64(rec[0:], uint64(now))
		binary.LittleEndian.PutUint16(rec[8:], uint16(dir))
		binary.LittleEndian.PutUint16(rec[10:], uint16(capLen))
		binary.LittleEndian.PutUint32(rec[12:], uint32(len(f)))
		copy(rec[recHeader:], f[:capLen])
	}
	w.handOff()
}

// handOff gives the current chunk to the writer goroutine. full has room
// for every chunk, so the send never blocks.
func (w *Writer) handOff() {
	if w.cur == nil || len(w.cur) == 0 {
		return
	}
	w.full <- w.cur
	w.cur = nil
}

// run writes chunks until full is closed, then flushes.
func (w *Writer) run(ng *pcapgo.NgWriter, cw *countingWriter) {
	defer close(w.done)
	stopped := false
	size := int64(cw.n)
	for chunk := range w.full {
		for b := chunk; len(b) >= recHeader; {
			ts := int64(binary.LittleEndian.Uint64(b[0:]))
			dir := int(binary.LittleEndian.Uint16(b[8:]))
			capLen := int(binary.LittleEndian.Uint16(b[10:]))
			wireLen := int(binary.LittleEndian.Uint32(b[12:]))
			data := b[recHeader : recHeader+capLen]
			b = b[recHeader+capLen:]
			block := int64(32 + (capLen+3)&^3) // enhanced packet block
			if stopped || w.err != nil || size+block > w.cfg.MaxBytes {
				stopped = true
				w.truncated.Add(1)
				continue
			}
			ci := gopacket.CaptureInfo{Timestamp: time.Unix(0, ts), CaptureLength: capLen, Length: wireLen, InterfaceIndex: dir}
			if err := ng.WritePacket(ci, data); err != nil {
				w.err = err
				w.truncated.Add(1)
				continue
			}
			size += block
			w.frames.Add(1)
			w.bytes.Store(uint64(size))
		}
		if len(w.full) == 0 && w.err == nil {
			// Idle: make what was captured readable now.
			if err := ng.Flush(); err != nil {
				w.err = err
			}
		}
		w.free <- chunk[:0]
	}
	if err := ng.Flush(); err != nil && w.err == nil {
		w.err = err
	}
}

// Stats returns the counters.
func (w *Writer) Stats() Stats {
	return Stats{Frames: w.frames.Load(), Bytes: w.bytes.Load(), Dropped: w.dropped.Load(), Truncated: w.truncated.Load()}
}

// ErrClosed is returned by a second Close.
var ErrClosed = errors.New("capture: closed")

// Close hands off what Frames copied last, waits for the writer goroutine
// to write every chunk and flush, and closes the file Create opened. It
// returns the first write error; a second Close returns ErrClosed.
func (w *Writer) Close() error {
	err := ErrClosed
	w.closeOnce.Do(func() {
		w.handOff()
		w.closed = true
		close(w.full)
		<-w.done
		err = w.err
		if w.file != nil {
			if cerr := w.file.Close(); cerr != nil && err == nil {
				err = cerr
			}
		}
		if err != nil {
			err = fmt.Errorf("capture: %w", err)
		}
	})
	return err
}

// countingWriter counts what the pcapng writer wrote through it.
type countingWriter struct {
	w io.Writer
	n int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += n
	return n, err
}
