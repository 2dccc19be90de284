package ndp

// Receiver half of a connection.
//
// Sequence tracking: a window of maxWindowPkts sequence numbers starting
// at base (the oldest seq not yet received) with two bitmaps: got (DATA
// received) and trimmed (a trimmed header, or DATA NACKed for lack of
// buffer, whose retransmission is still owed). They make duplicates cheap
// to recognise (re-ACK, no second pull, no second delivery) and tell the
// receiver, when LAST arrives, how many pulls retransmissions still need.
//
// Byte stream: a ring of Config.RecvBuffer bytes from readOff (next byte
// the application reads). nxtOff is the end of the contiguous prefix;
// out-of-order byte ranges beyond it are kept in a small sorted array.
//
// Flow control: a pull is handed to the host only while the buffer has
// room for at least one more MSS beyond everything received; otherwise it
// is owed and handed out as the application reads. DATA that does not fit
// is treated like a trimmed header (NACK, pull owed).
type receiver struct {
	synced  bool
	base    uint32
	got     [maxWindowPkts / 64]uint64
	trimmed [maxWindowPkts / 64]uint64
	nTrim   int
	noBuf   seqBitmap // subset of trimmed: NACKed for lack of buffer, beyond all data received
	nNoBuf  int

	buf     streamBuf
	readOff uint64
	nxtOff  uint64
	ranges  [maxRanges]byteRange
	nRanges int

	finKnown bool
	finOff   uint64

	pullCounter uint32 // last pull counter sent

	// the newest packet received (highest seq), and whether it carried LAST:
	// mid-stream unless it did and nothing before it is missing (waiting)
	hiSeq     uint32
	hiLast    bool
	hiSet     bool
	owedPulls int
}

type byteRange struct{ start, end uint64 }

const maxRanges = 64

func newReceiver(cfg *Config, prealloc bool) receiver {
	return receiver{buf: newStreamBuf(cfg.RecvBuffer, prealloc, cfg.ZeroPayload)}
}

func (r *receiver) reset() {
	buf := r.buf
	*r = receiver{buf: buf}
}

func (r *receiver) sync(isn uint32) {
	r.synced = true
	r.base = isn
}

func bit(m *[maxWindowPkts / 64]uint64, seq uint32) bool {
	i := seq & seqMask
	return m[i/64]&(1<<(i%64)) != 0
}

func setBit(m *[maxWindowPkts / 64]uint64, seq uint32, v bool) {
	i := seq & seqMask
	if v {
		m[i/64] |= 1 << (i % 64)
	} else {
		m[i/64] &^= 1 << (i % 64)
	}
}

// noteSeq records that (possibly trimmed) DATA seq with flags arrived new.
func (r *receiver) noteSeq(seq uint32, flags Flags) {
	if !r.hiSet || int32(seq-r.hiSeq) >= 0 {
		r.hiSeq, r.hiLast, r.hiSet = seq, flags&FlagLast != 0, true
	}
}

// seqClass classifies seq against the window.
type seqClass uint8

const (
	seqNew seqClass = iota
	seqDup
	seqOutOfWindow
)

func (r *receiver) classify(seq uint32) seqClass {
	d := seq - r.base
	switch {
	case d >= 1<<31:
		return seqDup // below base: received long ago
	case d >= maxWindowPkts:
		return seqOutOfWindow
	case bit(&r.got, seq):
		return seqDup
	}
	return seqNew
}

// markGot records DATA seq as received and slides the window.
//
// Packets NACKed for lack of buffer with a lower seq than seq become holes:
// seq order is stream order, so their data lies below seq's, in space the
// buffer already holds for the data received beyond it, and pulling them
// needs no new room. Left counted as "no buffer", the packet at the head of
// the stream would wait for room that reading can never make (everything
// before it read, the rest of the buffer taken by data after it): a
// deadlock (TestLiveness covers it).
func (r *receiver) markGot(seq uint32) {
	setBit(&r.got, seq, true)
	if bit(&r.trimmed, seq) {
		setBit(&r.trimmed, seq, false)
		r.nTrim--
	}
	if r.nNoBuf > 0 {
		r.nNoBuf -= r.noBuf.clearRange(r.base, seq-r.base+1)
	}
	for bit(&r.got, r.base) {
		setBit(&r.got, r.base, false)
		r.base++
	}
}

// markTrimmed records that seq's payload is owed; false if already known.
func (r *receiver) markTrimmed(seq uint32) bool {
	if bit(&r.trimmed, seq) {
		return false
	}
	setBit(&r.trimmed, seq, true)
	r.nTrim++
	return true
}

// maxEnd is the highest stream offset received so far.
func (r *receiver) maxEnd() uint64 {
	if r.nRanges > 0 {
		return max(r.nxtOff, r.ranges[r.nRanges-1].end)
	}
	return r.nxtOff
}

// room is the free space beyond everything received.
func (r *receiver) room() int { return int(r.readOff + uint64(r.buf.limit) - r.maxEnd()) }

// fits reports whether [off, off+n) can be stored now.
func (r *receiver) fits(off uint64, n int) bool {
	end := off + uint64(n)
	if end > r.readOff+uint64(r.buf.limit) {
		return false
	}
	if off <= r.nxtOff || r.nRanges < maxRanges {
		return true
	}
	for i := 0; i < r.nRanges; i++ { // full range table: only a merge fits
		if off <= r.ranges[i].end && end >= r.ranges[i].start {
			return true
		}
	}
	return false
}

// store copies payload at stream offset off (fits must have been true) and
// returns true if the contiguous prefix grew.
func (r *receiver) store(off uint64, p []byte) bool {
	end := off + uint64(len(p))
	if end <= r.nxtOff {
		return false
	}
	start := max(off, r.nxtOff)
	r.buf.ensure(r.readOff, r.maxEnd(), end)
	r.buf.put(start, p[start-off:])
	if start == r.nxtOff {
		r.nxtOff = end
		// absorb ranges now contiguous
		k := 0
		for k < r.nRanges && r.ranges[k].start <= r.nxtOff {
			r.nxtOff = max(r.nxtOff, r.ranges[k].end)
			k++
		}
		if k > 0 {
			copy(r.ranges[:], r.ranges[k:r.nRanges])
			r.nRanges -= k
		}
		return true
	}
	r.addRange(start, end)
	return false
}

func (r *receiver) addRange(s, e uint64) {
	// find first range with end >= s
	i := 0
	for i < r.nRanges && r.ranges[i].end < s {
		i++
	}
	j := i
	for j < r.nRanges && r.ranges[j].start <= e {
		s = min(s, r.ranges[j].start)
		e = max(e, r.ranges[j].end)
		j++
	}
	if j > i { // merge ranges i..j-1 into one
		r.ranges[i] = byteRange{s, e}
		copy(r.ranges[i+1:], r.ranges[j:r.nRanges])
		r.nRanges -= j - i - 1
		return
	}
	copy(r.ranges[i+1:r.nRanges+1], r.ranges[i:r.nRanges])
	r.ranges[i] = byteRange{s, e}
	r.nRanges++
}

// read copies in-order bytes into p.
func (r *receiver) read(p []byte) int {
	n := min(len(p), int(r.nxtOff-r.readOff))
	r.buf.get(p[:n], r.readOff)
	r.readOff += uint64(n)
	return n
}

func (r *receiver) readable() int { return int(r.nxtOff - r.readOff) }

// trimmedCount is the number of packets whose retransmission is owed.
func (r *receiver) trimmedCount() int { return r.nTrim }

// holes is the number of owed packets trimmed by the network (not NACKed
// for lack of buffer): their data fits where the buffer already reserves
// room, so pulling them never needs new room.
func (r *receiver) holes() int { return r.nTrim - r.nNoBuf }

// markNoBuf records that seq was NACKed because it did not fit; false if
// its retransmission was already owed.
func (r *receiver) markNoBuf(seq uint32) bool {
	if !r.noBuf.has(seq) {
		r.noBuf.set(seq)
		r.nNoBuf++
	}
	return r.markTrimmed(seq)
}
