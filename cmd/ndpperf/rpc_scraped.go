package main

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/ndpstack/ndpstack/internal/testbed"
)

// scrapedRPC is the ndp transport (embedded stacks, a new connection per
// RPC) with metrics on: during each of its turns a goroutine gathers both
// stacks' Collectors and encodes them in the text exposition format, as a
// Prometheus scrape does, every --scrape-every (10ms by default, 1,500
// times Prometheus's default interval). Run beside plain ndp in the same
// rotation, it shows what reading the counters costs the data path.
type scrapedRPC struct {
	*ndpRPC
	reg     *prometheus.Registry
	every   time.Duration
	scrapes atomic.Uint64
}

func newScrapedRPC(pair *testbed.Pair, o rpcOpts) (*scrapedRPC, error) {
	r, err := newNDPRPC(pair, o)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	// Each end's series get a label "end" to tell them apart.
	if err := prometheus.WrapRegistererWith(prometheus.Labels{"end": "client"}, reg).Register(r.client.Collector()); err != nil {
		r.close()
		return nil, err
	}
	if err := prometheus.WrapRegistererWith(prometheus.Labels{"end": "server"}, reg).Register(r.server.Collector()); err != nil {
		r.close()
		return nil, err
	}
	return &scrapedRPC{ndpRPC: r, reg: reg, every: o.scrape}, nil
}

func (r *scrapedRPC) name() string { return "ndp-scraped" }
func (r *scrapedRPC) mode() string {
	return fmt.Sprintf("%s; both stacks' metrics gathered and encoded every %v (%d scrapes)", r.ndpRPC.mode(), r.every, r.scrapes.Load())
}

func (r *scrapedRPC) echo(stop *atomic.Bool) error {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(r.every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			mfs, err := r.reg.Gather()
			if err != nil {
				continue
			}
			enc := expfmt.NewEncoder(io.Discard, expfmt.NewFormat(expfmt.TypeTextPlain))
			for _, mf := range mfs {
				enc.Encode(mf)
			}
			r.scrapes.Add(1)
		}
	}()
	defer wg.Wait()
	defer close(done)
	return r.ndpRPC.echo(stop)
}
