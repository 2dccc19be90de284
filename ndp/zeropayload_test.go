package ndp

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// zeroPayloadRun moves n bytes from a to b over a lossless, instantaneous link
// (pulls released at once) and returns every frame's header bytes with the UDP
// checksum field cleared, and both ends' stats. With zero set both endpoints
// use ZeroPayload: the sender's frame buffer is filled with junk before each
// PollFrame, which must leave the payload region untouched, each frame is
// checked to be a valid frame once its payload is zeroed, and b's reads must
// leave the read buffer untouched.
func zeroPayloadRun(t *testing.T, zero bool, n int) (hdrs [][]byte, sa, sb Stats) {
	t.Helper()
	a := mkEP(t, ipA, func(c *Config) { c.ZeroPayload = zero; c.MTU = 9000 })
	b := mkEP(t, ipB, func(c *Config) { c.ZeroPayload = zero; c.MTU = 9000 })
	data := pattern(7, n)
	h, _ := dialWrite(t, a, b, 0, DialOptions{})
	var now Time
	written, got := 0, 0
	closed := false
	var rb bytes.Buffer
	buf := make([]byte, 9100)
	rd := make([]byte, 4096)
	eps := [2]*Endpoint{a, b}
	for step := 0; step < 100_000; step++ {
		now += us
		if written < n {
			k, err := a.Write(h, data[written:], now)
			if err != nil {
				t.Fatal(err)
			}
			written += k
		} else if !closed {
			if err := a.CloseWrite(h, now); err != nil {
				t.Fatal(err)
			}
			closed = true
		}
		moved := false
		for i, e := range eps {
			e.HandleTimers(now)
			for {
				ev, ok := e.PollEvent()
				if !ok {
					break
				}
				switch ev.Kind {
				case EventPulls:
					for k := 0; k < ev.Count; k++ {
						e.PullReleased(ev.Handle, now)
					}
				case EventReadable:
					for {
						for j := range rd {
							rd[j] = 0x55
						}
						k, err := e.Read(ev.Handle, rd)
						if zero && bytes.Count(rd, []byte{0x55}) != len(rd) {
							t.Fatal("ZeroPayload Read wrote into p")
						}
						got += k
						if !zero {
							rb.Write(rd[:k])
						}
						if k == 0 || errors.Is(err, io.EOF) {
							break
						}
					}
				}
			}
			for {
				for j := range buf {
					buf[j] = 0xA5 // junk a ZeroPayload endpoint must not read or send as payload
				}
				k, _ := e.PollFrame(buf, now, true)
				if k == 0 {
					break
				}
				moved = true
				f := buf[:k]
				if zero {
					if k > HeaderOverhead && bytes.Count(f[HeaderOverhead:], []byte{0xA5}) != k-HeaderOverhead {
						t.Fatal("ZeroPayload PollFrame wrote into the payload region") // the simulator overlaps frame buffers past the headers
					}
					z := append([]byte(nil), f...)
					clear(z[HeaderOverhead:])
					var pf Frame
					if err := ParseFrame(z, &pf); err != nil {
						t.Fatalf("ZeroPayload frame with a zero payload does not parse: %v", err)
					}
				}
				hd := append([]byte(nil), f[:min(k, HeaderOverhead)]...)
				hd[offUDP+6], hd[offUDP+7] = 0, 0
				hdrs = append(hdrs, append(hd, byte(k>>8), byte(k)))
				if err := eps[1-i].HandleFrame(f, now); err != nil {
					t.Fatalf("frame refused: %v", err)
				}
			}
		}
		if closed && got == n && !moved {
			break
		}
	}
	if got != n {
		t.Fatalf("received %d of %d bytes", got, n)
	}
	if !zero && !bytes.Equal(rb.Bytes(), data) {
		t.Fatal("bytes differ")
	}
	return hdrs, a.Stats(), b.Stats()
}

// TestZeroPayload: an endpoint carrying lengths only sends the same frames
// (headers and lengths) and ends in the same state as one carrying bytes, its
// frames are valid frames of a zero payload, and its peer accepts them
// whatever the buffer's payload region held.
func TestZeroPayload(t *testing.T) {
	const n = 1_000_000
	hb, ab, bb := zeroPayloadRun(t, false, n)
	hz, az, bz := zeroPayloadRun(t, true, n)
	if len(hb) < 100 || len(hb) != len(hz) {
		t.Fatalf("%d frames with bytes, %d with ZeroPayload", len(hb), len(hz))
	}
	for i := range hb {
		if !bytes.Equal(hb[i], hz[i]) {
			t.Fatalf("frame %d differs:\n% x\n% x", i, hb[i], hz[i])
		}
	}
	if ab != az || bb != bz {
		t.Fatalf("stats differ:\n%+v\n%+v\n%+v\n%+v", ab, az, bb, bz)
	}
}
