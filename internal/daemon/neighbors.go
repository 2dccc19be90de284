package daemon

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ndpstack/ndpstack/internal/engine"
)

// Neighbour resolution off the core loop
//
// engine.Stack.Dial resolves a peer's MAC through its Resolver, and the
// kernel's (engine.KernelResolver) waits for ARP: up to seconds for an
// address nobody answers. The core loop serves every application, so it
// must never wait for that. ndpd therefore gives the Stack a Resolver that
// never blocks (neighbors.Resolve answers only from a hand-off slot the
// core fills itself) and resolves in a few worker goroutines, each with
// its own blocking resolver:
//
//	core   EngineTransport.Dial → Stack.Dial → neighbors.Resolve: errNeedResolve
//	       → neighbors.start(ip): a bounded job queue (full: ErrResolverBusy);
//	         the dial is pending (its ConnID is not usable yet)
//	worker Resolve(ctx with DialTimeout) on its own resolver → results → wake
//	       the core (its doorbell)
//	core   EngineTransport.Events: for each result, hand-off slot = (ip, MAC),
//	       Stack.Dial again for every dial waiting on ip (the first call
//	       caches the MAC in the Stack for NeighborTTL), slot cleared;
//	       one TEDialed per dial (its connection, or the resolution's error)
//
// The core goroutine is the only one calling Stack.Dial, start and
// handOff; workers touch only the job and result channels. At most
// len(resolvers) resolutions run at once, and at most cap(jobs) addresses
// wait for a worker.

// errNeedResolve: the address is not in the Stack's neighbour cache and no
// resolution result is being handed off; the caller resolves in the
// background. Never reaches an application.
var errNeedResolve = errors.New("ndpd: neighbour not resolved yet")

// neighborResult is one finished resolution.
type neighborResult struct {
	ip  [4]byte
	mac [6]byte
	err error
}

// neighbors is the non-blocking engine.Resolver plus its workers.
type neighbors struct {
	timeout time.Duration
	jobs    chan [4]byte
	results chan neighborResult
	wake    atomic.Pointer[func()] // rings the core's doorbell; nil until the core sets it

	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	resolvers []engine.Resolver

	mu      sync.Mutex // handoff (Resolve runs inside Stack.Dial; keep it safe for any caller)
	handoff struct {
		ip  [4]byte
		mac [6]byte
		ok  bool
	}
	closeOnce sync.Once
}

// newNeighbors starts one worker per resolver. queue bounds the addresses
// waiting for a worker; timeout bounds one resolution.
func newNeighbors(resolvers []engine.Resolver, queue int, timeout time.Duration) *neighbors {
	ctx, cancel := context.WithCancel(context.Background())
	n := &neighbors{
		timeout:   timeout,
		jobs:      make(chan [4]byte, queue),
		results:   make(chan neighborResult, queue+len(resolvers)),
		ctx:       ctx,
		cancel:    cancel,
		resolvers: resolvers,
	}
	for _, r := range resolvers {
		n.wg.Add(1)
		go n.worker(r)
	}
	return n
}

// Resolve implements engine.Resolver without blocking: the MAC being
// handed off for ip, else errNeedResolve.
func (n *neighbors) Resolve(_ context.Context, ip [4]byte) ([6]byte, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.handoff.ok && n.handoff.ip == ip {
		return n.handoff.mac, nil
	}
	return [6]byte{}, errNeedResolve
}

// handOff makes Resolve answer ip with mac until clearHandOff.
func (n *neighbors) handOff(ip [4]byte, mac [6]byte) {
	n.mu.Lock()
	n.handoff.ip, n.handoff.mac, n.handoff.ok = ip, mac, true
	n.mu.Unlock()
}

func (n *neighbors) clearHandOff() {
	n.mu.Lock()
	n.handoff.ok = false
	n.mu.Unlock()
}

// start queues a resolution of ip; false when the queue is full.
func (n *neighbors) start(ip [4]byte) bool {
	select {
	case n.jobs <- ip:
		return true
	default:
		return false
	}
}

// setWake sets the function a worker calls after publishing a result.
func (n *neighbors) setWake(wake func()) { n.wake.Store(&wake) }

func (n *neighbors) worker(r engine.Resolver) {
	defer n.wg.Done()
	for {
		var ip [4]byte
		select {
		case ip = <-n.jobs:
		case <-n.ctx.Done():
			return
		}
		ctx, cancel := context.WithTimeout(n.ctx, n.timeout)
		mac, err := r.Resolve(ctx, ip)
		cancel()
		select {
		case n.results <- neighborResult{ip: ip, mac: mac, err: err}:
		case <-n.ctx.Done():
			return
		}
		if w := n.wake.Load(); w != nil {
			(*w)()
		}
	}
}

// Close stops the workers (a resolution in progress is cancelled) and
// closes every resolver that is an io.Closer. The Stack calls it when it
// closes (its Resolver is an io.Closer).
func (n *neighbors) Close() error {
	var err error
	n.closeOnce.Do(func() {
		n.cancel()
		n.wg.Wait()
		for _, r := range n.resolvers {
			if c, ok := r.(io.Closer); ok {
				if cerr := c.Close(); err == nil {
					err = cerr
				}
			}
		}
	})
	return err
}
