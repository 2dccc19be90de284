package ndp

// Received is how many bytes of the peer's stream h has received so far:
// the in-order prefix plus every byte stored beyond a hole. A D3 receiver
// reports it to its pull queue (pullpacer.PullQueue.Progress), whose
// deadline allocation needs each flow's remaining size. ok is false for an
// unknown handle.
func (e *Endpoint) Received(h Handle) (n uint64, ok bool) {
	c := e.conn(h)
	if c == nil {
		return 0, false
	}
	r := &c.rcv
	n = r.nxtOff
	for i := 0; i < r.nRanges; i++ {
		n += r.ranges[i].end - r.ranges[i].start
	}
	return n, true
}
