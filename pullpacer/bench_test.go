package pullpacer

import (
	"fmt"
	"testing"

	"github.com/ndpstack/ndpstack/ndp"
)

// BenchmarkPullQueue measures one enqueue (Add of one pull, as for one data arrival)
// plus one dequeue (Next releasing one pull) with 10,000 active connections, each
// keeping a small backlog. ns/op is the cost per pull.
func BenchmarkPullQueue(b *testing.B) {
	for _, policy := range []Policy{PolicyFair, PolicyPriority, PolicyDeadline} {
		b.Run(fmt.Sprintf("%v/conns=10000", policy), func(b *testing.B) {
			const conns = 10000
			cfg := tenGig
			cfg.Policy = policy
			cfg.ExpectedConns = conns
			q := mustQueue(b, cfg)
			for h := 1; h <= conns; h++ {
				switch policy {
				case PolicyPriority:
					q.SetFlow(ndp.Handle(h), Flow{Priority: uint8(h % 4)}, 0)
				case PolicyDeadline:
					if h%10 == 0 { // 10% deadline flows, undersubscribed
						q.SetFlow(ndp.Handle(h), Flow{Size: 1 << 20, Deadline: 1 << 50}, 0)
					}
				}
				q.Add(ndp.Handle(h), 4)
			}
			// Handles in a scrambled order so the map and the table are not walked
			// sequentially.
			order := make([]ndp.Handle, conns)
			for k := range order {
				order[k] = ndp.Handle((k*7919)%conns + 1)
			}
			now := ndp.Time(0)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				q.Add(order[i%conns], 1)
				now += 1231
				if _, ok := q.Next(now); !ok {
					b.Fatal("nothing released")
				}
			}
		})
	}
}

func BenchmarkTokenBucket(b *testing.B) {
	tb, _ := NewTokenBucket(BucketConfig{Rate: 10e9, Depth: 9000}, 0)
	now := ndp.Time(0)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		now += 1231
		tb.Allow(now, 1538)
	}
}
