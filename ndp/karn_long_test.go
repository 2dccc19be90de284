package ndp

import (
	"testing"
	"time"
)

// The first copy's send time is kept as a 32-bit nanosecond offset (4.29 s).
// A resend more than that after the first copy (an RTO of several seconds,
// which Config allows) must not time an ACK of the first copy from a clamped
// offset: that sample would be seconds short.
func TestKarnFirstCopyLongAgo(t *testing.T) {
	for _, steps := range [][]Time{
		{5 * Time(time.Second)},                        // one resend 5 s after the first copy
		{3 * Time(time.Second), 6 * Time(time.Second)}, // two resends, the second 6 s after it
	} {
		d := pktDesc{path: 0}
		for i, at := range steps {
			d.rtoLost = true
			d.noteResend(at, uint16(i+1))
			d.sentAt, d.path = at, uint16(i+1)
		}
		ackAt := steps[len(steps)-1] + 500*ms
		if m, _, ok := d.rttSample(&Header{PathID: 0}, ackAt); ok && m != ackAt {
			t.Errorf("resends at %v: an ACK of the first copy at %v gave a %v sample, want %v or none",
				steps, time.Duration(ackAt), time.Duration(m), time.Duration(ackAt))
		}
	}
}
