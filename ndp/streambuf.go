package ndp

// streamBuf is a growable ring of bytes addressed by 64-bit stream offset:
// byte o lives at buf[o % len(buf)]. It starts at initialStreamBuf (or
// empty) and doubles up to limit (the configured buffer size), copying the
// live span on growth, so a connection moving 20 KB does not hold 2×256 KB.
// Pooled connections keep their grown buffers, so steady state does not
// allocate.
//
// A zero streamBuf (Config.ZeroPayload) holds no bytes: ensure, put and get
// do nothing, and limit still bounds the stream span the caller allows.
type streamBuf struct {
	buf   []byte
	limit int
	zero  bool
}

const initialStreamBuf = 16 << 10

func newStreamBuf(limit int, prealloc, zero bool) streamBuf {
	b := streamBuf{limit: limit, zero: zero}
	if prealloc && !zero {
		b.buf = make([]byte, min(initialStreamBuf, limit))
	}
	return b
}

// ensure makes room for stream bytes up to end (exclusive) while [lo, hi)
// is live; callers guarantee end-lo <= limit.
func (b *streamBuf) ensure(lo, hi, end uint64) {
	if b.zero || end-lo <= uint64(len(b.buf)) {
		return
	}
	n := max(len(b.buf), min(initialStreamBuf, b.limit))
	for uint64(n) < end-lo {
		n *= 2
	}
	n = min(n, b.limit)
	old := b.buf
	b.buf = make([]byte, n)
	if len(old) > 0 && hi > lo {
		for off := lo; off < hi; {
			i := int(off % uint64(len(old)))
			k := copy(b.buf[int(off%uint64(n)):], old[i:min(len(old), i+int(hi-off))])
			off += uint64(k)
		}
	}
}

// put stores p at stream offset off (ensure must have made room).
func (b *streamBuf) put(off uint64, p []byte) {
	if b.zero {
		return
	}
	for done := 0; done < len(p); {
		i := int((off + uint64(done)) % uint64(len(b.buf)))
		done += copy(b.buf[i:], p[done:])
	}
}

// get copies stream bytes [off, off+len(dst)) into dst.
func (b *streamBuf) get(dst []byte, off uint64) {
	if b.zero {
		return
	}
	for done := 0; done < len(dst); {
		i := int((off + uint64(done)) % uint64(len(b.buf)))
		done += copy(dst[done:], b.buf[i:])
	}
}
