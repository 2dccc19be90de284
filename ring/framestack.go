package ring

// FrameStack is the application's free list of its own TX partition (the
// Partition in its region Layout): Pop frames to fill and submit on a TX
// ring, Push them back when they come home on the completion ring. It checks
// that every pushed frame is in the partition and not already free, so a
// daemon bug cannot make the application hand out one frame twice.
//
// One goroutine owns a FrameStack. The daemon's Pool remains the authority;
// this is the application's own bookkeeping.
type FrameStack struct {
	part   Partition
	free   []uint32
	isFree []bool
}

// NewFrameStack returns a stack holding every frame of p.
func NewFrameStack(p Partition) *FrameStack {
	s := &FrameStack{part: p, free: make([]uint32, 0, p.Count), isFree: make([]bool, p.Count)}
	for i := int64(p.Count) - 1; i >= 0; i-- {
		s.free = append(s.free, p.First+uint32(i))
		s.isFree[i] = true
	}
	return s
}

// Len returns the number of free frames.
func (s *FrameStack) Len() int { return len(s.free) }

// Pop takes up to len(dst) free frames into dst and returns how many; a
// short count means the partition is exhausted (backpressure).
func (s *FrameStack) Pop(dst []uint32) int {
	n := min(len(dst), len(s.free))
	top := len(s.free) - n
	copy(dst, s.free[top:])
	for _, f := range dst[:n] {
		s.isFree[f-s.part.First] = false
	}
	s.free = s.free[:top]
	return n
}

// Push returns frames to the stack. Frames outside the partition
// (ErrFrameRange) or already free (ErrDoubleFree) are skipped; Push returns
// how many it took and the first error.
func (s *FrameStack) Push(frames ...uint32) (int, error) {
	var first error
	n := 0
	for _, f := range frames {
		var err error
		switch {
		case !s.part.Contains(f):
			err = ErrFrameRange
		case s.isFree[f-s.part.First]:
			err = ErrDoubleFree
		default:
			s.isFree[f-s.part.First] = true
			s.free = append(s.free, f)
			n++
			continue
		}
		if first == nil {
			first = err
		}
	}
	return n, first
}

// PushDescs is Push for the frames of descriptors read from the completion ring.
func (s *FrameStack) PushDescs(ds []Desc) (int, error) {
	var first error
	n := 0
	for i := range ds {
		k, err := s.Push(ds[i].Frame)
		n += k
		if first == nil {
			first = err
		}
	}
	return n, first
}
