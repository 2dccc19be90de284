package ring

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// BufferArea is a mapping of the frames the Pool accounts for: Frames frames
// of FrameSize bytes in a sealed memfd. In daemon mode it is the afxdp UMEM
// (the afxdp package creates and seals that memfd and the daemon passes it in
// the Attachment); NewBufferArea makes a stand-alone one for tests,
// benchmarks and the embedded engine.
//
// Both processes map all of it: an application can read every frame, its
// peers' included. What the daemon guarantees is narrower and is enforced by
// the Pool: it only transmits frames the submitting application owns.
type BufferArea struct {
	mem       []byte
	fd        int
	frames    uint32
	frameSize uint32
}

// NewBufferArea creates a sealed memfd of frames*frameSize bytes and maps it.
func NewBufferArea(frames, frameSize uint32) (*BufferArea, error) {
	if frames == 0 || frameSize < MinFrameSize || frameSize > MaxFrameSize {
		return nil, configErr("BufferArea", "%d frames of %d bytes", frames, frameSize)
	}
	size := uint64(frames) * uint64(frameSize)
	fd, err := newSealedMemfd("ndp-buffers", size)
	if err != nil {
		return nil, err
	}
	b, err := mapBuffer(fd, frames, frameSize)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return b, nil
}

// MapBufferArea maps the buffer memfd fd (from an Attachment, with geometry
// from the region Layout) and takes ownership of fd. The memfd must be
// sealed against shrinking and hold at least frames*frameSize bytes, so that
// no access through the mapping can fault.
func MapBufferArea(fd int, frames, frameSize uint32) (*BufferArea, error) {
	b, err := mapBuffer(fd, frames, frameSize)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return b, nil
}

func mapBuffer(fd int, frames, frameSize uint32) (*BufferArea, error) {
	size := uint64(frames) * uint64(frameSize)
	have, err := sealedSize(fd)
	if err != nil {
		return nil, err
	}
	if size == 0 || uint64(have) < size || size > 1<<40 {
		return nil, fmt.Errorf("%w: buffer memfd of %d bytes for %d frames of %d", ErrBadAttachment, have, frames, frameSize)
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("ring: mmap buffer area: %w", err)
	}
	return &BufferArea{mem: mem, fd: fd, frames: frames, frameSize: frameSize}, nil
}

// FD returns the memfd (to put in an Attachment).
func (b *BufferArea) FD() int { return b.fd }

// Frames and FrameSize return the geometry.
func (b *BufferArea) Frames() uint32    { return b.frames }
func (b *BufferArea) FrameSize() uint32 { return b.frameSize }

// Frame returns frame i (len and cap FrameSize), or nil if i is out of range.
// The slice aliases shared memory: it is only yours while you own frame i.
func (b *BufferArea) Frame(i uint32) []byte {
	if i >= b.frames {
		return nil
	}
	off := uint64(i) * uint64(b.frameSize)
	return b.mem[off : off+uint64(b.frameSize) : off+uint64(b.frameSize)]
}

// Data returns the bytes a descriptor names (frame d.Frame, [Off, Off+Len)),
// or nil if they are out of bounds.
func (b *BufferArea) Data(d *Desc) []byte {
	f := b.Frame(d.Frame)
	if f == nil || uint32(d.Off)+uint32(d.Len) > b.frameSize {
		return nil
	}
	return f[d.Off : uint32(d.Off)+uint32(d.Len)]
}

// Close unmaps the area and closes the memfd. Nothing may use a frame slice after.
func (b *BufferArea) Close() error {
	var err error
	if b.mem != nil {
		err = unix.Munmap(b.mem)
		b.mem = nil
	}
	if b.fd >= 0 {
		if cerr := unix.Close(b.fd); err == nil {
			err = cerr
		}
		b.fd = -1
	}
	return err
}
