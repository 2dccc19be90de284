package fabric

import (
	"errors"
	"testing"

	"github.com/ndpstack/ndpstack/ndp"
)

var (
	macA = [6]byte{2, 0, 0, 0, 0, 1}
	macB = [6]byte{2, 0, 0, 0, 0, 2}
	ipA  = [4]byte{10, 9, 0, 1}
	ipB  = [4]byte{10, 9, 0, 2}
)

// frame builds a valid NDP frame from A to B.
func frame(t testing.TB, typ ndp.PacketType, seq uint32, payload int) []byte {
	t.Helper()
	f := ndp.Frame{SrcMAC: macA, DstMAC: macB, SrcIP: ipA, DstIP: ipB, SrcPort: 40000, DstPort: ndp.DefaultPort,
		Header: ndp.Header{Type: typ, SrcPort: 1, DstPort: 2, ConnID: 7, Seq: seq}, Payload: make([]byte, payload)}
	for i := range f.Payload {
		f.Payload[i] = byte(i)
	}
	b := make([]byte, ndp.HeaderOverhead+payload)
	n, err := ndp.BuildFrame(b, &f)
	if err != nil {
		t.Fatal(err)
	}
	return b[:n]
}

func parse(t testing.TB, b []byte) ndp.Frame {
	t.Helper()
	var f ndp.Frame
	if err := ndp.ParseFrame(b, &f); err != nil {
		t.Fatalf("frame out of the port does not parse: %v", err)
	}
	return f
}

func newPort(t testing.TB, cfg Config) *Port {
	t.Helper()
	p, err := NewPort(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaultsAndValidation(t *testing.T) {
	p := newPort(t, Config{})
	c := p.Config()
	if c.DataQueue != 8 || c.HeaderQueueBytes != 72000 || c.WRRHeaders != 10 || c.Trim != TrimRandom {
		t.Fatalf("defaults = %+v", c)
	}
	for _, bad := range []Config{{DataQueue: -1}, {WRRHeaders: -2}, {HeaderQueueBytes: 10}, {Trim: 9}, {PhantomRate: -1}} {
		if _, err := NewPort(bad); !errors.Is(err, ErrConfig) {
			t.Errorf("NewPort(%+v) = %v, want ErrConfig", bad, err)
		}
	}
}

func TestTrimArrivalWhenDataQueueFull(t *testing.T) {
	p := newPort(t, Config{DataQueue: 8, Trim: TrimArrival})
	for i := 0; i < 8; i++ {
		if v, _, _, _ := p.Enqueue(frame(t, ndp.TypeData, uint32(i), 1000), 0); v != Queued {
			t.Fatalf("packet %d: %v, want queued", i, v)
		}
	}
	v, out, _, _ := p.Enqueue(frame(t, ndp.TypeData, 8, 1000), 0)
	if v != QueuedTrimmed || len(out) != ndp.HeaderOverhead {
		t.Fatalf("9th packet: %v len %d, want trimmed to %d", v, len(out), ndp.HeaderOverhead)
	}
	f := parse(t, out)
	if f.Header.Flags&ndp.FlagTrimmed == 0 || f.Header.PayloadLen != 1000 || f.Header.Seq != 8 {
		t.Fatalf("trimmed header = %+v", f.Header)
	}
	if d, h := p.Len(); d != 8 || h != 1 {
		t.Fatalf("queues = %d data %d headers, want 8 and 1", d, h)
	}
	// The header leaves first (priority), then data in order.
	got, _ := p.Dequeue(0)
	if parse(t, got).Header.Seq != 8 {
		t.Fatal("the trimmed header did not leave first")
	}
	for i := 0; i < 8; i++ {
		got, _ := p.Dequeue(0)
		if s := parse(t, got).Header.Seq; s != uint32(i) {
			t.Fatalf("data %d left as seq %d", i, s)
		}
	}
	if _, ok := p.Dequeue(0); ok || !p.Empty() {
		t.Fatal("port not empty")
	}
	if s := p.Stats(); s.Trimmed != 1 || s.TrimmedTail != 0 || s.MaxDataDepth != 8 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestTrimTail(t *testing.T) {
	p := newPort(t, Config{DataQueue: 2, Trim: TrimTail})
	p.Enqueue(frame(t, ndp.TypeData, 0, 500), 0)
	p.Enqueue(frame(t, ndp.TypeData, 1, 500), 0)
	v, out, bounced, dropped := p.Enqueue(frame(t, ndp.TypeData, 2, 500), 0)
	if v != Queued || len(out) != ndp.HeaderOverhead+500 || bounced != nil || dropped != nil {
		t.Fatalf("arrival: %v len %d", v, len(out))
	}
	h, _ := p.Dequeue(0)
	if f := parse(t, h); f.Header.Seq != 1 || f.Header.Flags&ndp.FlagTrimmed == 0 {
		t.Fatalf("expected the tail (seq 1) trimmed first, got %+v", f.Header)
	}
	for _, want := range []uint32{0, 2} {
		d, _ := p.Dequeue(0)
		if f := parse(t, d); f.Header.Seq != want || len(f.Payload) != 500 {
			t.Fatalf("data seq %d len %d, want seq %d full", f.Header.Seq, len(f.Payload), want)
		}
	}
	if p.Stats().TrimmedTail != 1 {
		t.Fatal("tail trim not counted")
	}
}

func TestTrimRandomIsAboutHalfAndHalf(t *testing.T) {
	const n = 2000
	p := newPort(t, Config{DataQueue: 1, HeaderQueueBytes: (n + 1) * ndp.HeaderOverhead, Seed: 42})
	p.Enqueue(frame(t, ndp.TypeData, 0, 100), 0)
	for i := 0; i < n; i++ {
		p.Enqueue(frame(t, ndp.TypeData, uint32(i+1), 100), 0)
	}
	s := p.Stats()
	if s.Trimmed != n || s.Bounced != 0 {
		t.Fatalf("trimmed %d bounced %d, want %d and 0", s.Trimmed, s.Bounced, n)
	}
	if frac := float64(s.TrimmedTail) / n; frac < 0.45 || frac > 0.55 {
		t.Fatalf("tail fraction %.3f, want about 0.5", frac)
	}
}

func TestWeightedRoundRobin(t *testing.T) {
	p := newPort(t, Config{DataQueue: 8, WRRHeaders: 10})
	for i := 0; i < 8; i++ {
		p.Enqueue(frame(t, ndp.TypeData, uint32(i), 1000), 0)
	}
	for i := 0; i < 25; i++ {
		p.Enqueue(frame(t, ndp.TypeAck, uint32(100+i), 0), 0)
	}
	var order []byte
	for {
		f, ok := p.Dequeue(0)
		if !ok {
			break
		}
		if parse(t, f).Header.Type == ndp.TypeData {
			order = append(order, 'D')
		} else {
			order = append(order, 'h')
		}
	}
	want := "hhhhhhhhhhDhhhhhhhhhhDhhhhhDDDDDD"
	if string(order) != want {
		t.Fatalf("service order\n got %s\nwant %s", order, want)
	}
}

func TestReturnToSenderWhenHeaderQueueFull(t *testing.T) {
	hdr := ndp.HeaderOverhead
	p := newPort(t, Config{DataQueue: 1, HeaderQueueBytes: 2 * hdr, Trim: TrimArrival})
	p.Enqueue(frame(t, ndp.TypeData, 0, 800), 0)
	for i := 1; i <= 2; i++ {
		if v, _, _, _ := p.Enqueue(frame(t, ndp.TypeData, uint32(i), 800), 0); v != QueuedTrimmed {
			t.Fatalf("seq %d: %v", i, v)
		}
	}
	v, out, _, _ := p.Enqueue(frame(t, ndp.TypeData, 3, 800), 0)
	if v != Bounced {
		t.Fatalf("header overflow: %v, want bounced", v)
	}
	f := parse(t, out)
	if f.DstIP != ipA || f.SrcIP != ipB || f.DstMAC != macA || f.Header.Flags&(ndp.FlagBounced|ndp.FlagTrimmed) != ndp.FlagBounced|ndp.FlagTrimmed {
		t.Fatalf("bounced frame not addressed back to its sender: %+v", f)
	}
	// A control frame that finds the header queue full is dropped, not bounced.
	if v, _, _, _ := p.Enqueue(frame(t, ndp.TypePull, 9, 0), 0); v != Dropped {
		t.Fatalf("PULL on a full header queue: %v, want dropped", v)
	}
	if s := p.Stats(); s.Bounced != 1 || s.Dropped != 1 || s.Trimmed != 3 {
		t.Fatalf("stats = %+v", s)
	}

	q := newPort(t, Config{DataQueue: 1, HeaderQueueBytes: hdr, Trim: TrimArrival, NoReturnToSender: true})
	q.Enqueue(frame(t, ndp.TypeData, 0, 800), 0)
	q.Enqueue(frame(t, ndp.TypeData, 1, 800), 0)
	if v, _, _, _ := q.Enqueue(frame(t, ndp.TypeData, 2, 800), 0); v != Dropped {
		t.Fatalf("without return-to-sender: %v, want dropped", v)
	}
}

func TestTailTrimBounce(t *testing.T) {
	hdr := ndp.HeaderOverhead
	p := newPort(t, Config{DataQueue: 1, HeaderQueueBytes: hdr, Trim: TrimTail})
	p.Enqueue(frame(t, ndp.TypeAck, 50, 0), 0) // fills the header queue
	p.Enqueue(frame(t, ndp.TypeData, 0, 800), 0)
	v, out, bounced, dropped := p.Enqueue(frame(t, ndp.TypeData, 1, 800), 0)
	if v != Queued || parse(t, out).Header.Seq != 1 || bounced == nil || dropped != nil {
		t.Fatalf("verdict %v bounced %v dropped %v", v, bounced != nil, dropped != nil)
	}
	if f := parse(t, bounced); f.Header.Seq != 0 || f.DstIP != ipA {
		t.Fatalf("bounced tail = %+v", f.Header)
	}
}

func TestNonNDPFramesTailDrop(t *testing.T) {
	p := newPort(t, Config{DataQueue: 1})
	arp := make([]byte, 60)
	arp[12], arp[13] = 0x08, 0x06
	if v, _, _, _ := p.Enqueue(arp, 0); v != Queued {
		t.Fatalf("ARP: %v", v)
	}
	arp2 := append([]byte(nil), arp...)
	if v, _, _, _ := p.Enqueue(arp2, 0); v != Dropped {
		t.Fatalf("second ARP on a full queue: %v, want dropped", v)
	}
	// A data frame arriving to a queue whose tail is not NDP trims itself.
	q := newPort(t, Config{DataQueue: 1, Trim: TrimTail})
	q.Enqueue(arp, 0)
	if v, _, _, _ := q.Enqueue(frame(t, ndp.TypeData, 1, 100), 0); v != QueuedTrimmed {
		t.Fatalf("data behind a non-NDP tail: %v, want trimmed", v)
	}
}

func TestPhantomQueueMarksAboveThreshold(t *testing.T) {
	// 1 Gb/s phantom drain: a 1,000-byte frame every 4 µs (2 Gb/s) grows the phantom
	// queue by 500 bytes per frame; past 3,000 bytes frames leave marked CE.
	p := newPort(t, Config{DataQueue: 100, PhantomRate: 1e9})
	var marked, sent int
	now := ndp.Time(0)
	for i := 0; i < 20; i++ {
		p.Enqueue(frame(t, ndp.TypeData, uint32(i), 1000-ndp.HeaderOverhead), now)
		f, _ := p.Dequeue(now)
		parse(t, f) // the IPv4 checksum must still be valid after marking
		if f[15]&3 == 3 {
			marked++
		}
		sent++
		now += 4000
	}
	if marked == 0 || marked >= sent {
		t.Fatalf("marked %d of %d, want the later ones", marked, sent)
	}
	if int(p.Stats().PhantomMarks) != marked {
		t.Fatalf("PhantomMarks %d, counted %d", p.Stats().PhantomMarks, marked)
	}
	// Slower than the drain rate: never marked.
	q := newPort(t, Config{DataQueue: 100, PhantomRate: 1e9})
	now = 0
	for i := 0; i < 20; i++ {
		q.Enqueue(frame(t, ndp.TypeData, uint32(i), 1000-ndp.HeaderOverhead), now)
		q.Dequeue(now)
		now += 10000
	}
	if q.Stats().PhantomMarks != 0 {
		t.Fatalf("marked %d frames below the phantom rate", q.Stats().PhantomMarks)
	}
}

func TestSteadyStateDoesNotAllocate(t *testing.T) {
	p := newPort(t, Config{DataQueue: 8})
	frames := make([][]byte, 16)
	for i := range frames {
		frames[i] = frame(t, ndp.TypeData, uint32(i), 1000)
	}
	ack := frame(t, ndp.TypeAck, 0, 0)
	allocs := testing.AllocsPerRun(200, func() {
		for _, f := range frames[:8] {
			p.Enqueue(f, 0)
		}
		p.Enqueue(ack, 0)
		for !p.Empty() {
			p.Dequeue(0)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per round, want 0", allocs)
	}
}

// Bytes follows every way a frame enters and leaves the queues: queued, tail-trimmed
// (the tail's bytes move to the header queue), dequeued.
func TestBytesFollowQueues(t *testing.T) {
	p := newPort(t, Config{DataQueue: 2, Trim: TrimTail})
	check := func(when string) {
		t.Helper()
		var d, h int
		for i := 0; i < p.data.len(); i++ {
			d += len(p.data.buf[(p.data.head+i)%len(p.data.buf)])
		}
		for i := 0; i < p.headers.len(); i++ {
			h += len(p.headers.buf[(p.headers.head+i)%len(p.headers.buf)])
		}
		if gd, gh := p.Bytes(); gd != d || gh != h {
			t.Fatalf("%s: Bytes() = %d, %d; queues hold %d, %d", when, gd, gh, d, h)
		}
	}
	p.Enqueue(frame(t, ndp.TypeData, 0, 500), 0)
	p.Enqueue(frame(t, ndp.TypeData, 1, 300), 0)
	check("two queued")
	p.Enqueue(frame(t, ndp.TypeData, 2, 700), 0)
	check("tail trimmed")
	p.Enqueue(frame(t, ndp.TypeAck, 0, 0), 0)
	check("ack queued")
	for !p.Empty() {
		p.Dequeue(0)
		check("dequeued")
	}
	if d, h := p.Bytes(); d != 0 || h != 0 {
		t.Fatalf("empty port holds %d, %d bytes", d, h)
	}
}

// byteTrimmer is a Trimmer that knows nothing of NDP: frames starting with 'D'
// are data, cut to 30 bytes with their first byte rewritten to 'T'; 'T' and 'C'
// frames are control.
type byteTrimmer struct{}

func (byteTrimmer) Trimmable(f []byte) bool { return f[0] == 'D' }
func (byteTrimmer) Control(f []byte) bool   { return f[0] == 'T' || f[0] == 'C' }
func (byteTrimmer) Trim(f []byte) (int, error) {
	f[0] = 'T'
	return min(len(f), 30), nil
}

// TestTrimmerHook: a port with a Trimmer admits, trims and serves by it with
// the same queues and WRR as for NDP, and never returns a frame to its sender.
func TestTrimmerHook(t *testing.T) {
	p, err := NewPort(Config{DataQueue: 2, HeaderQueueBytes: 64, WRRHeaders: 2, Trim: TrimArrival, Trimmer: byteTrimmer{}})
	if err != nil {
		t.Fatal(err)
	}
	data := func() []byte { f := make([]byte, 100); f[0] = 'D'; return f }
	for i, want := range []Verdict{Queued, Queued, QueuedTrimmed, QueuedTrimmed, Dropped} {
		if v, out, _, _ := p.Enqueue(data(), 0); v != want || v == QueuedTrimmed && (len(out) != 30 || out[0] != 'T') {
			t.Fatalf("data frame %d: %v (%d bytes), want %v", i, v, len(out), want)
		}
	}
	if v, _, _, _ := p.Enqueue([]byte("C-control"), 0); v != Dropped { // 60 of 64 header bytes held
		t.Fatalf("control frame past the header queue: %v", v)
	}
	if p.ReturnToSender(make([]byte, ndp.HeaderOverhead)) {
		t.Fatal("a port with a Trimmer returned a frame to its sender")
	}
	var order []byte
	for !p.Empty() {
		f, _ := p.Dequeue(0)
		order = append(order, f[0])
	}
	if string(order) != "TTDD" {
		t.Fatalf("departure order %q, want the two trimmed headers first (WRR 2:1)", order)
	}
	if st := p.Stats(); st.Trimmed != 3 || st.Dropped != 2 || st.Bounced != 0 {
		t.Fatalf("stats %+v", st)
	}
}
