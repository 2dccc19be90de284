package ndp

import (
	"bytes"
	"encoding/binary"
	"testing"
)

func fuzzSeeds() [][]byte {
	var out [][]byte
	add := func(h Header, payload []byte, trim, bounce bool) {
		f := testFrame(payload)
		f.Header = h
		b := make([]byte, HeaderOverhead+len(payload))
		n, _ := BuildFrame(b, &f)
		if trim {
			n, _ = TrimFrame(b[:n])
		}
		if bounce {
			BounceFrame(b[:n])
		}
		out = append(out, b[:n])
	}
	add(Header{Type: TypeData, Flags: FlagSYN | FlagLast, SrcPort: 1, DstPort: 80, ConnID: 9, Seq: 5, Offset: 0}, []byte("hello"), false, false)
	add(Header{Type: TypeData, Flags: FlagFIN, SrcPort: 1, DstPort: 80, ConnID: 9, Seq: 6, Offset: 5}, bytes.Repeat([]byte{1}, 100), true, false)
	add(Header{Type: TypeData, SrcPort: 1, DstPort: 80, ConnID: 9, Seq: 7}, bytes.Repeat([]byte{2}, 50), true, true)
	add(Header{Type: TypeAck, SrcPort: 80, DstPort: 1, ConnID: 9, Seq: 5}, nil, false, false)
	add(Header{Type: TypeNack, SrcPort: 80, DstPort: 1, ConnID: 9, Seq: 5}, nil, false, false)
	add(Header{Type: TypePull, SrcPort: 80, DstPort: 1, ConnID: 9, PullCounter: 3}, nil, false, false)
	add(Header{Type: TypeReset, SrcPort: 80, DstPort: 1, ConnID: 9, Code: ResetRefused}, nil, false, false)
	return out
}

func FuzzParseFrame(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Add([]byte{})
	f.Add(make([]byte, HeaderOverhead))
	f.Fuzz(func(t *testing.T, b []byte) {
		var fr Frame
		err := ParseFrame(b, &fr)
		// A commodity-trimmed parse never delivers payload it did not check,
		// and accepts every frame ParseFrame accepts, unchanged.
		var cf Frame
		cerr := ParseFrameCommodity(b, &cf, &testCommodity)
		if cerr == nil && err != nil && (cf.Header.Flags&FlagTrimmed == 0 || len(cf.Payload) != 0) {
			t.Fatalf("commodity parse accepted a malformed frame as %+v with %d payload bytes", cf.Header, len(cf.Payload))
		}
		if err == nil && (cerr != nil || cf.Header.Flags&FlagTrimmed != fr.Header.Flags&FlagTrimmed && b[offIP+1]>>2 != 46 && b[offIP+1]>>2 != 48) {
			t.Fatalf("commodity parse refused or changed a valid frame: %v", cerr)
		}
		// switch helpers never panic on anything
		c := append([]byte(nil), b...)
		IsTrimmable(c)
		IsControl(c)
		FramePriority(c)
		FrameDst(c)
		if n, terr := TrimFrame(c); terr == nil {
			var g Frame
			if err == nil {
				if perr := ParseFrame(c[:n], &g); perr != nil {
					t.Fatalf("trimmed valid frame does not parse: %v", perr)
				}
				if g.Header.PayloadLen != fr.Header.PayloadLen || g.Header.Flags&FlagTrimmed == 0 {
					t.Fatal("trim lost the payload length")
				}
			}
			c = c[:n]
		}
		BounceFrame(c)
		if err != nil {
			return
		}
		// round trip: rebuild and re-parse
		buf := make([]byte, HeaderOverhead+len(fr.Payload))
		n, berr := BuildFrame(buf, &fr)
		if berr != nil {
			t.Fatalf("parsed frame does not rebuild: %v", berr)
		}
		var g Frame
		if perr := ParseFrame(buf[:n], &g); perr != nil {
			t.Fatalf("rebuilt frame does not parse: %v", perr)
		}
		if g.Header != fr.Header || g.SrcIP != fr.SrcIP || g.DstIP != fr.DstIP || g.SrcMAC != fr.SrcMAC ||
			g.DstMAC != fr.DstMAC || g.SrcPort != fr.SrcPort || g.DstPort != fr.DstPort || !bytes.Equal(g.Payload, fr.Payload) {
			t.Fatalf("round trip changed the frame:\n%+v\n%+v", fr, g)
		}
		// frames in our canonical form (as BuildFrame writes them) are byte-identical
		total := offIP + int(binary.BigEndian.Uint16(b[offIP+2:]))
		if b[offIP+8] == 64 && b[offIP+1] == 0 && binary.BigEndian.Uint16(b[offIP+4:]) == 0 &&
			binary.BigEndian.Uint16(b[offIP+6:]) == 0x4000 && !bytes.Equal(buf[:n], b[:total]) {
			t.Fatalf("canonical frame not reproduced byte for byte")
		}
	})
}

// FuzzEndpoint feeds an endpoint (listening on port 80, with one dialed
// connection of its own) a program of operations decoded from the input:
// raw frames, structurally valid frames with fuzzed fields and correct
// checksums, timer advances, polling, reads, writes, aborts. Invariants:
// no panic, connection and time-wait counts within limits, receive and
// send buffers within their configured size, every emitted frame valid.
func FuzzEndpoint(f *testing.F) {
	f.Add([]byte{1, 1, 1, 0, 0, 0, 9, 0, 0, 0, 5, 0, 0, 3, 0, 10, 3, 4, 2, 100, 3})
	f.Add([]byte{6, 50, 3, 1, 2, 0, 0, 0, 9, 0, 0, 0, 5, 0, 0, 3, 0, 10, 4, 3, 2, 255, 3, 7})
	for _, s := range fuzzSeeds() {
		f.Add(append([]byte{0, byte(len(s))}, s...))
	}
	f.Fuzz(func(t *testing.T, prog []byte) {
		const maxConns, maxTW = 8, 16
		// the first op's top bit turns control-frame coalescing on
		coalesce := len(prog) > 0 && prog[0]&0x80 != 0
		e, err := NewEndpoint(Config{
			LocalIP: ipB, LocalMAC: [6]byte{2, 0, 0, 0, 0, 2}, MaxConns: maxConns, MaxTimeWait: maxTW,
			RecvBuffer: 8 << 10, SendBuffer: 4 << 10, IW: 4, ControlQueue: 64, Paths: 3,
			CoalesceControl: coalesce,
		})
		if err != nil {
			t.Fatal(err)
		}
		e.Listen(80)
		own, _ := e.Dial(Addr{IP: ipA, Port: 1}, DialOptions{Size: 100, Deadline: 5 * ms}, 0)
		now := Time(0)
		out := make([]byte, 4096)
		rd := make([]byte, 3000)
		var handles []Handle
		handles = append(handles, own)
		payload := make([]byte, 2000)
		for i := range payload {
			payload[i] = byte(i)
		}
		next := func(n int) []byte {
			if len(prog) < n {
				prog = prog[len(prog):]
				return nil
			}
			b := prog[:n]
			prog = prog[n:]
			return b
		}
		for steps := 0; len(prog) > 0 && steps < 2000; steps++ {
			op := next(1)[0]
			switch op % 9 {
			case 0: // raw frame
				l := next(1)
				if l == nil {
					break
				}
				e.HandleFrame(next(int(l[0])), now)
			case 1: // valid frame with fuzzed fields
				fl := next(16)
				if fl == nil {
					break
				}
				fr := Frame{SrcIP: ipA, DstIP: ipB, SrcPort: 0xC000, DstPort: DefaultPort}
				if fl[0]&0x80 != 0 {
					fr.SrcIP[3] = fl[0] & 3
				}
				fr.Header = Header{
					Type: PacketType(fl[1]%5 + 1), Flags: (Flags(fl[2]) | Flags(fl[13]>>4)<<8) & knownFlags,
					SrcPort: uint16(fl[3] % 3), DstPort: 80 - uint16(fl[4]%2)*79,
					ConnID: uint32(fl[5] % 4), Seq: binary.BigEndian.Uint32(fl[6:10]),
					SynOffset: uint16(fl[10]), PullCounter: uint32(fl[11]), PathID: uint16(fl[12] % 4),
					Code: ResetCode(fl[13] % 4), Offset: uint64(binary.BigEndian.Uint16(fl[14:16])) * 7,
				}
				if fr.Header.Flags&FlagBounced != 0 {
					fr.SrcIP, fr.DstIP = ipA, ipB
				}
				if fl[1] >= 0x80 {
					relativeToConn(e, &fr, fl)
				}
				if fr.Header.Type == TypeData {
					fr.Payload = payload[:int(fl[0]&0x7f)*13]
				}
				n, err := BuildFrame(out, &fr)
				if err != nil {
					t.Fatal(err)
				}
				e.HandleFrame(out[:n], now)
			case 2: // time passes
				d := next(1)
				if d == nil {
					break
				}
				now += Time(d[0]) * 50 * us
				e.HandleTimers(now)
			case 3, 4: // transmit everything (allowPush alternates)
				for k := 0; k < 10000; k++ {
					n, _ := e.PollFrame(out, now, op%9 == 3)
					if n == 0 {
						break
					}
					var g Frame
					if err := ParseFrame(out[:n], &g); err != nil {
						t.Fatalf("endpoint emitted an invalid frame: %v", err)
					}
				}
			case 5: // events; release every pull
				for k := 0; k < 10000; k++ {
					ev, ok := e.PollEvent()
					if !ok {
						break
					}
					switch ev.Kind {
					case EventAccepted:
						handles = append(handles, ev.Handle)
					case EventPulls:
						for j := 0; j < ev.Count && j < 64; j++ {
							e.PullReleased(ev.Handle, now)
						}
					}
				}
			case 6, 7: // read / write on some handle
				x := next(1)
				if x == nil || len(handles) == 0 {
					break
				}
				h := handles[int(x[0])%len(handles)]
				if op%9 == 6 {
					e.Write(h, payload[:int(x[0])*7%len(payload)], now)
				} else {
					e.Read(h, rd)
				}
			case 8: // close variants
				x := next(1)
				if x == nil || len(handles) == 0 {
					break
				}
				h := handles[int(x[0])%len(handles)]
				switch x[0] % 4 {
				case 0:
					e.CloseWrite(h, now)
				case 1:
					e.Abort(h, now)
				case 2:
					e.Quench(h, now)
				case 3:
					e.Release(h)
				}
			}
			st := e.Stats()
			if st.ConnsActive > maxConns || st.TimeWaitActive > maxTW {
				t.Fatalf("limits exceeded: %d conns, %d time-wait", st.ConnsActive, st.TimeWaitActive)
			}
			for _, c := range e.conns {
				if c == nil {
					continue
				}
				if c.rcv.maxEnd()-c.rcv.readOff > uint64(c.rcv.buf.limit) || c.snd.written-c.snd.bufStart > uint64(c.snd.buf.limit) ||
					len(c.rcv.buf.buf) > c.rcv.buf.limit || len(c.snd.buf.buf) > c.snd.buf.limit {
					t.Fatalf("buffer bound exceeded: rcv %d snd %d", c.rcv.maxEnd()-c.rcv.readOff, c.snd.written-c.snd.bufStart)
				}
				if c.rcv.nRanges > maxRanges || c.snd.nxtSeq-c.snd.una > maxWindowPkts {
					t.Fatal("range table or send window overflow")
				}
			}
			if e.ctl.n > len(e.ctl.buf) || e.events.n > 64*maxConns+1024 {
				t.Fatalf("queues unbounded: ctl %d events %d", e.ctl.n, e.events.n)
			}
		}
	})
}

// relativeToConn makes fr's sequence numbers and pull counter land in the
// window of the connection fr is addressed to, if there is one (random
// 32-bit values almost never do): the sender's handling of ACKs, bitmaps,
// carried ACKs, NACKs, PULLs and bounces, and the receiver's of DATA.
func relativeToConn(e *Endpoint, fr *Frame, fl []byte) {
	h := &fr.Header
	key := connKey{remoteIP: binary.BigEndian.Uint32(fr.SrcIP[:]), remotePort: h.SrcPort, localPort: h.DstPort, connID: h.ConnID}
	bounced := h.Flags&FlagBounced != 0
	if bounced {
		key.remotePort, key.localPort = h.DstPort, h.SrcPort
	}
	idx, ok := e.table.get(key)
	if !ok || idx < 0 {
		return
	}
	c := e.conns[idx]
	switch {
	case h.Type == TypeData && !bounced:
		h.Seq = c.rcv.base + uint32(fl[6]%40)
		if h.Flags&FlagAck != 0 {
			h.PullCounter = c.snd.una + uint32(fl[11]%40)
		}
	case h.Type == TypePull || h.Flags&FlagPull != 0:
		h.Seq = c.snd.una + uint32(fl[6]%40)
		h.PullCounter = c.snd.lastPull + uint32(fl[11]%16)
	default:
		h.Seq = c.snd.una + uint32(fl[6]%40)
		h.PullCounter = c.snd.una + uint32(fl[11]%40)
	}
}
