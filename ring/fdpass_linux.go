package ring

import (
	"encoding/binary"
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// MaxFDs bounds the descriptors RecvFDs accepts in one message.
const MaxFDs = 16

// SendFDs sends msg (at least one byte) with fds attached as SCM_RIGHTS over
// a Unix socket. The kernel duplicates the descriptors into the receiver;
// the caller keeps (and still must close) its own.
func SendFDs(c *net.UnixConn, msg []byte, fds []int) error {
	if len(msg) == 0 {
		return fmt.Errorf("%w: SCM_RIGHTS needs a non-empty message", ErrBadAttachment)
	}
	if len(fds) > MaxFDs {
		return fmt.Errorf("%w: %d descriptors, at most %d", ErrBadAttachment, len(fds), MaxFDs)
	}
	n, oobn, err := c.WriteMsgUnix(msg, unix.UnixRights(fds...), nil)
	if err != nil {
		return fmt.Errorf("ring: send fds: %w", err)
	}
	if n != len(msg) || oobn != len(unix.UnixRights(fds...)) {
		return fmt.Errorf("ring: send fds: short write (%d/%d bytes, %d oob)", n, len(msg), oobn)
	}
	return nil
}

// RecvFDs receives one message into msg and the descriptors attached to it
// (at most MaxFDs). The descriptors are close-on-exec and belong to the
// caller. On any error every descriptor that did arrive is closed, so a
// malformed or truncated message cannot leak descriptors into the receiver.
func RecvFDs(c *net.UnixConn, msg []byte) (n int, fds []int, err error) {
	oob := make([]byte, unix.CmsgSpace(MaxFDs*4))
	n, oobn, flags, _, err := c.ReadMsgUnix(msg, oob)
	if err != nil {
		return 0, nil, err
	}
	if oobn > 0 {
		cmsgs, perr := unix.ParseSocketControlMessage(oob[:oobn])
		if perr != nil {
			return 0, nil, fmt.Errorf("%w: control message: %v", ErrBadAttachment, perr)
		}
		for _, cm := range cmsgs {
			got, rerr := unix.ParseUnixRights(&cm)
			if rerr != nil {
				continue // not SCM_RIGHTS
			}
			fds = append(fds, got...)
		}
	}
	if flags&(unix.MSG_CTRUNC|unix.MSG_TRUNC) != 0 {
		closeAll(fds)
		return 0, nil, fmt.Errorf("%w: message or descriptors truncated", ErrBadAttachment)
	}
	return n, fds, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

// Attachment is what the daemon hands an application: the region memfd,
// the two eventfds, and the buffer area (UMEM) memfd.
type Attachment struct {
	Region     int // region memfd (sealed)
	WakeDaemon int // eventfd the application writes to wake the daemon
	WakeApp    int // eventfd the daemon writes to wake the application
	Buffer     int // buffer area memfd (sealed), frames of BufferGeometry
}

// Close closes every descriptor of a.
func (a Attachment) Close() { closeAll([]int{a.Region, a.WakeDaemon, a.WakeApp, a.Buffer}) }

// Attachment message: 16 bytes, little-endian.
//
//	0 uint32 attachMagic ("NDPA")
//	4 uint32 Version (the region layout version the sender speaks)
//	8 uint32 descriptor count (4: region, wakeDaemon, wakeApp, buffer)
//	12 uint32 zero
const (
	attachMagic uint32 = 0x4150444e
	attachLen          = 16
	attachFDs          = 4
)

// SendAttachment sends a to the application over its control connection.
func SendAttachment(c *net.UnixConn, a Attachment) error {
	var msg [attachLen]byte
	binary.LittleEndian.PutUint32(msg[0:], attachMagic)
	binary.LittleEndian.PutUint32(msg[4:], Version)
	binary.LittleEndian.PutUint32(msg[8:], attachFDs)
	return SendFDs(c, msg[:], []int{a.Region, a.WakeDaemon, a.WakeApp, a.Buffer})
}

// RecvAttachment receives an attachment from the daemon. The descriptors
// belong to the caller (OpenRegion takes three of them; MapBufferArea the
// fourth). A message that is not an attachment, or carries a version this
// build does not speak, is an error and every received descriptor is closed.
func RecvAttachment(c *net.UnixConn) (Attachment, error) {
	var msg [attachLen + 1]byte
	n, fds, err := RecvFDs(c, msg[:])
	if err != nil {
		return Attachment{}, err
	}
	le := binary.LittleEndian
	switch {
	case n != attachLen || le.Uint32(msg[0:]) != attachMagic:
		err = fmt.Errorf("%w: %d-byte message without the attachment magic", ErrBadAttachment, n)
	case le.Uint32(msg[4:]) != Version:
		err = &HeaderError{Field: "attachment version", Reason: fmt.Sprintf("got %d, want %d", le.Uint32(msg[4:]), Version), Version: true}
	case le.Uint32(msg[8:]) != attachFDs || len(fds) != attachFDs:
		err = fmt.Errorf("%w: %d descriptors (header says %d), want %d", ErrBadAttachment, len(fds), le.Uint32(msg[8:]), attachFDs)
	}
	if err != nil {
		closeAll(fds)
		return Attachment{}, err
	}
	return Attachment{Region: fds[0], WakeDaemon: fds[1], WakeApp: fds[2], Buffer: fds[3]}, nil
}
