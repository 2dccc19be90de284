package pullpacer

import (
	"testing"

	"github.com/ndpstack/ndpstack/ndp"
)

// FuzzPullQueue runs arbitrary operation sequences against the queue and checks it
// against a plain model: pulls released only for handles that had some, counts match
// after every step, never more than MaxBurst back to back, quenched flows stay quiet.
func FuzzPullQueue(f *testing.F) {
	f.Add([]byte{0, 1, 5, 6, 0, 0, 2, 3, 1, 7, 9, 4, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{2, 1, 200, 10, 0, 1, 3, 6, 0, 0, 6, 0, 0, 6, 0, 0, 5, 1, 6, 9, 9})
	f.Add([]byte{3, 4, 1, 250, 0, 4, 9, 0, 6, 1, 1, 6, 0, 0, 2, 2, 0, 6, 3, 3})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) < 1 {
			return
		}
		policy := Policy(ops[0] % 3)
		q, err := NewPullQueue(QueueConfig{LinkRate: 10e9, PullBytes: 1538, Policy: policy, MaxConns: 6, Reallocate: 1000})
		if err != nil {
			t.Fatal(err)
		}
		model := map[ndp.Handle]int64{}
		quenched := map[ndp.Handle]bool{}
		now := ndp.Time(0)
		var lastRelease ndp.Time = -1
		run := 0
		arg := func(k int) byte {
			if k < len(ops) {
				return ops[k]
			}
			return 0
		}
		for k := 1; k < len(ops); k += 3 {
			op, a, b := ops[k]%8, arg(k+1), arg(k+2)
			h := ndp.Handle(a % 8) // 0 is invalid on purpose
			switch op {
			case 0:
				n := int(b%5) - 1
				before := q.Len()
				q.Add(h, n)
				if q.Len() != before {
					model[h] += int64(n)
				}
			case 1:
				q.SetFlow(h, Flow{Priority: b % 3, Size: int64(b) * 10000, Deadline: now + ndp.Time(a)*100000}, now)
			case 2:
				q.Drop(h)
				model[h] = 0
			case 3:
				q.Remove(h)
				delete(model, h)
				delete(quenched, h)
			case 4:
				q.Progress(h, int64(b)*5000)
			case 5, 6:
				now += ndp.Time(b) * 100
				for {
					got, ok := q.Next(now)
					if !ok {
						break
					}
					if model[got] <= 0 || quenched[got] {
						t.Fatalf("released %d with model pending %d quenched %v", got, model[got], quenched[got])
					}
					model[got]--
					if now-lastRelease < 600 { // half of the 1230ns interval
						if run++; run > 2 {
							t.Fatalf("%d releases back to back", run)
						}
					} else {
						run = 1
					}
					lastRelease = now
				}
			case 7:
				now += ndp.Time(b) * 10000
			}
			for {
				qh, ok := q.PollQuenched()
				if !ok {
					break
				}
				if policy != PolicyDeadline {
					t.Fatalf("policy %v quenched %d", policy, qh)
				}
				if _, known := model[qh]; known || q.Pending(qh) == 0 {
					model[qh] = 0
					quenched[qh] = true
				}
			}
			var sum int64
			for mh, n := range model {
				sum += n
				if q.Pending(mh) != n {
					t.Fatalf("step %d: pending(%d) = %d, model %d", k, mh, q.Pending(mh), n)
				}
			}
			if q.Len() != sum {
				t.Fatalf("step %d: Len %d, model %d", k, q.Len(), sum)
			}
		}
	})
}
