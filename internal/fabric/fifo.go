package fabric

// fifo is a growable ring of frames. It only grows (to the high-water mark of its
// queue), so a port in steady state does not allocate.
type fifo struct {
	buf        [][]byte
	head, size int
}

func (q *fifo) init(capacity int) { q.buf = make([][]byte, capacity) }

func (q *fifo) len() int { return q.size }

func (q *fifo) push(f []byte) {
	if q.size == len(q.buf) {
		nb := make([][]byte, 2*len(q.buf)+1)
		for i := 0; i < q.size; i++ {
			nb[i] = q.buf[(q.head+i)%len(q.buf)]
		}
		q.buf, q.head = nb, 0
	}
	q.buf[q.wrap(q.head+q.size)] = f
	q.size++
}

// wrap maps i in [0, 2*len(buf)) onto the ring (a compare instead of a division: the
// ring's length is not a constant).
func (q *fifo) wrap(i int) int {
	if i >= len(q.buf) {
		i -= len(q.buf)
	}
	return i
}

func (q *fifo) pop() []byte {
	f := q.buf[q.head]
	q.buf[q.head] = nil
	q.head = q.wrap(q.head + 1)
	q.size--
	return f
}

func (q *fifo) popTail() []byte {
	i := q.wrap(q.head + q.size - 1)
	f := q.buf[i]
	q.buf[i] = nil
	q.size--
	return f
}

func (q *fifo) peekTail() []byte { return q.buf[q.wrap(q.head+q.size-1)] }
