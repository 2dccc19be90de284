package fabric

import (
	"testing"

	"github.com/ndpstack/ndpstack/ndp"
)

// A header trimmed upstream that meets a full header queue is returned to its sender
// (addresses swapped, BOUNCED set) instead of dropped; control frames and headers that
// already bounced stay dropped, and so does everything with return-to-sender off.
func TestReturnToSenderOfUpstreamHeader(t *testing.T) {
	src, dst := [4]byte{10, 0, 0, 1}, [4]byte{10, 0, 0, 2}
	build := func(t *testing.T, typ ndp.PacketType, trim bool) []byte {
		b := make([]byte, ndp.MaxFrameLen(1500))
		f := ndp.Frame{SrcIP: src, DstIP: dst, SrcPort: 0xC001, DstPort: ndp.DefaultPort,
			Header: ndp.Header{Type: typ, SrcPort: 1, DstPort: 2, ConnID: 7, Seq: 9}}
		if typ == ndp.TypeData {
			f.Payload = make([]byte, 100)
		}
		n, err := ndp.BuildFrame(b, &f)
		if err != nil {
			t.Fatal(err)
		}
		b = b[:n]
		if trim { // as a switch upstream would
			m, err := ndp.TrimFrame(b)
			if err != nil {
				t.Fatal(err)
			}
			b = b[:m]
		}
		return b
	}
	for _, tc := range []struct {
		name   string
		frame  func(t *testing.T) []byte
		noRTS  bool
		bounce bool
	}{
		{"trimmed header", func(t *testing.T) []byte { return build(t, ndp.TypeData, true) }, false, true},
		{"trimmed header, RTS off", func(t *testing.T) []byte { return build(t, ndp.TypeData, true) }, true, false},
		{"ack", func(t *testing.T) []byte { return build(t, ndp.TypeAck, false) }, false, false},
		{"pull", func(t *testing.T) []byte { return build(t, ndp.TypePull, false) }, false, false},
		{"already bounced", func(t *testing.T) []byte {
			b := build(t, ndp.TypeData, true)
			if err := ndp.BounceFrame(b); err != nil {
				t.Fatal(err)
			}
			return b
		}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPort(Config{HeaderQueueBytes: 64, NoReturnToSender: tc.noRTS})
			if err != nil {
				t.Fatal(err)
			}
			f := tc.frame(t)
			v, out, _, _ := p.Enqueue(f, 0)
			if v != Dropped {
				t.Fatalf("verdict %v, want the full header queue to drop it", v)
			}
			got := p.ReturnToSender(out)
			if got != tc.bounce {
				t.Fatalf("ReturnToSender = %v, want %v", got, tc.bounce)
			}
			st := p.Stats()
			if tc.bounce {
				var fr ndp.Frame
				if err := ndp.ParseFrame(out, &fr); err != nil {
					t.Fatalf("bounced frame does not parse: %v", err)
				}
				if fr.DstIP != src || fr.SrcIP != dst || fr.Header.Flags&ndp.FlagBounced == 0 {
					t.Fatalf("not returned to sender: %+v", fr)
				}
				if st.Bounced != 1 || st.Dropped != 0 {
					t.Fatalf("stats %+v, want 1 bounced, 0 dropped", st)
				}
			} else if st.Bounced != 0 || st.Dropped != 1 {
				t.Fatalf("stats %+v, want 0 bounced, 1 dropped", st)
			}
		})
	}
}
