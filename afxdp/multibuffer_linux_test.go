package afxdp

import (
	"bytes"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/internal/testbed"
	"golang.org/x/sys/unix"
)

// sendChain copies frame into as many of p's frames as it needs and
// transmits them as one descriptor chain (XDP_PKT_CONTD on all but the
// last), waiting (bounded) for the completion.
func sendChain(t *testing.T, p *Port, frame []byte) int {
	t.Helper()
	u, q := p.UMEM(), p.Queues()[0]
	fs := int(u.FrameSize())
	descs := make([]Desc, (len(frame)+fs-1)/fs)
	if n := u.Alloc(descs); n != len(descs) {
		t.Fatalf("Alloc %d of %d", n, len(descs))
	}
	for i := range descs {
		piece := frame[i*fs : min((i+1)*fs, len(frame))]
		descs[i].Len = uint32(copy(u.Buffer(descs[i])[:len(piece)], piece))
		if i < len(descs)-1 {
			descs[i].Options = unix.XDP_PKT_CONTD
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	sent := 0
	for sent < len(descs) || q.TxOutstanding() > 0 {
		n, err := q.Transmit(descs[sent:])
		if err != nil {
			t.Fatal(err)
		}
		sent += n
		if time.Now().After(deadline) {
			t.Fatalf("transmit stuck: sent %d of %d, outstanding %d", sent, len(descs), q.TxOutstanding())
		}
	}
	return len(descs)
}

// receiveChain spins on q until one whole packet arrived (bounded) and
// returns its bytes, joined, and how many descriptors carried it.
func receiveChain(t *testing.T, p *Port) ([]byte, int) {
	t.Helper()
	q := p.Queues()[0]
	descs := make([]Desc, MaxFragments)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if k := q.Receive(descs); k > 0 {
			var out []byte
			lens := make([]uint32, k)
			for i, d := range descs[:k] {
				lens[i] = d.Len
				out = append(out, p.UMEM().Bytes(d)...)
				if cont := d.Options&unix.XDP_PKT_CONTD != 0; cont != (i < k-1) {
					t.Fatalf("descriptor %d of %d: XDP_PKT_CONTD %v", i, k, cont)
				}
			}
			if _, err := p.UMEM().Release(descs[:k]); err != nil {
				t.Fatal(err)
			}
			t.Logf("received %d bytes as descriptors of %v bytes", len(out), lens)
			return out, k
		}
		if time.Now().After(deadline) {
			t.Fatal("no packet received")
		}
	}
}

// A 9000-byte IPv4 packet crosses a veth pair of MTU 9000 between two
// multi-buffer ports (4 KB frames) as a chain of three descriptors, both
// ways, byte for byte; a chain the TX ring cannot take whole waits; a
// chain of more than MaxFragments is refused, and its frames stay the
// caller's; the ledger balances.
func TestMultiBufferJumboRoundTrip(t *testing.T) {
	tb := testbed.NewT(t)
	pair, err := tb.NewPair(testbed.VethConfig{MTU: 9000})
	if err != nil {
		t.Fatal(err)
	}
	cfg := func(ifname string) Config {
		return Config{Interface: ifname, UDPPort: testPort, FrameSize: 4096, MultiBuffer: true, RingSize: 64, NumFrames: 256}
	}
	a := openIn(t, pair.A, cfg(pair.Veth.A.Name))
	b := openIn(t, pair.B, cfg(pair.Veth.B.Name))

	f := frameTo(pair.Veth, testPort)
	payload := make([]byte, 9000-testbed.UDPHeaderLen+14)
	for i := range payload {
		payload[i] = byte(i*7 + i>>8)
	}
	frame := make([]byte, testbed.UDPHeaderLen+len(payload))
	frame = frame[:f.Build(frame, payload)]
	if len(frame) != 9014 {
		t.Fatalf("test frame is %d bytes, want 9014", len(frame))
	}
	if n := sendChain(t, a, frame); n != 3 {
		t.Fatalf("sent as %d descriptors, want 3", n)
	}
	got, descs := receiveChain(t, b)
	if !bytes.Equal(got, frame) {
		t.Fatalf("B received %d bytes in %d descriptors, not the %d sent", len(got), descs, len(frame))
	}
	// And back: B sends what it received to A.
	back := frameTo(&testbed.Veth{A: pair.Veth.B, B: pair.Veth.A}, testPort)
	back.Build(frame, payload)
	sendChain(t, b, frame)
	got, descs = receiveChain(t, a)
	if !bytes.Equal(got, frame) || descs < 3 {
		t.Fatalf("A received %d bytes in %d descriptors, not the %d sent", len(got), descs, len(frame))
	}

	// A chain longer than the kernel takes is refused whole.
	u, q := a.UMEM(), a.Queues()[0]
	long := make([]Desc, MaxFragments+1)
	if n := u.Alloc(long); n != len(long) {
		t.Fatalf("Alloc %d", n)
	}
	for i := range long {
		long[i].Len = 64
		if i < len(long)-1 {
			long[i].Options = unix.XDP_PKT_CONTD
		}
	}
	if n, err := q.Transmit(long); n != 0 || err == nil {
		t.Errorf("chain of %d: Transmit %d, %v; want 0 and an error", len(long), n, err)
	}
	// An unterminated chain waits for its end (nothing sent, no error).
	if n, err := q.Transmit(long[:2]); n != 0 || err != nil {
		t.Errorf("unterminated chain: Transmit %d, %v; want 0, nil", n, err)
	}
	if _, err := u.Release(long); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*Port{a, b} {
		for deadline := time.Now().Add(5 * time.Second); p.Queues()[0].TxOutstanding() > 0 && time.Now().Before(deadline); {
			p.Queues()[0].Complete()
		}
		if err := p.UMEM().Accounting().Check(); err != nil {
			t.Error(err)
		}
		st, err := p.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if st[0].KernelRxInvalidDescs != 0 || st[0].KernelTxInvalidDescs != 0 || st[0].KernelRxDropped != 0 {
			t.Errorf("kernel counters %+v", st[0])
		}
	}
}
