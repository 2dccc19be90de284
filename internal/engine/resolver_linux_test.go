package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/internal/testbed"
)

// The kernel resolver resolves a live peer, and gives up on a silent
// address at the caller's deadline (not its own 3 s default), with
// ErrNoNeighbor naming the address.
func TestKernelResolverDeadline(t *testing.T) {
	tb := testbed.NewT(t)
	p, err := tb.NewPair(testbed.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var res *KernelResolver
	if err := p.A.Do(func() (err error) {
		res, err = NewKernelResolver(p.Veth.A.Index, p.Veth.A.Name)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	mac, err := res.Resolve(ctx, p.Veth.B.Addr.Addr().As4())
	if err != nil || mac != [6]byte(p.Veth.B.MAC) {
		t.Fatalf("live peer: %x, %v (want %x)", mac, err, p.Veth.B.MAC)
	}
	silent := p.Veth.B.Addr.Addr().As4()
	silent[3] += 50 // in the subnet, nobody there
	const wait = 400 * time.Millisecond
	ctx2, cancel2 := context.WithTimeout(context.Background(), wait)
	defer cancel2()
	start := time.Now()
	_, err = res.Resolve(ctx2, silent)
	took := time.Since(start)
	if !errors.Is(err, ErrNoNeighbor) {
		t.Fatalf("silent address: %v, want ErrNoNeighbor", err)
	}
	if took < wait*3/4 || took > 2*time.Second {
		t.Fatalf("gave up after %v, want about the caller's %v", took, wait)
	}
	t.Logf("silent address: %v after %v", err, took)
}
