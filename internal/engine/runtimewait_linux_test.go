package engine

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/internal/testbed"
)

// An XDPLink with RuntimeWait parks Wait in the Go runtime's netpoller: a
// Wake from another goroutine ends a parked Wait, a Wake before Wait is
// not lost, and a timeout ends it.
func TestXDPRuntimeWaitWakeAndTimeout(t *testing.T) {
	tb := testbed.NewT(t)
	p, err := tb.NewPair(testbed.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var l *XDPLink
	if err := p.A.Do(func() (err error) {
		l, err = OpenXDP(XDPConfig{Interface: p.Veth.A.Name, RuntimeWait: true})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	wait := func(what string, timeout time.Duration, during func()) {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- l.Wait(timeout) }()
		if during != nil {
			during()
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s: Wait: %v", what, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: Wait did not return", what)
		}
	}
	wait("timeout", 20*time.Millisecond, nil)
	l.Wake()
	wait("wake before wait", -1, nil)
	wait("wake during wait", -1, func() {
		time.Sleep(10 * time.Millisecond) // let Wait park (the test passes either way)
		l.Wake()
	})
}

// Stacks that never spin (Spin < 0) and wait parked in the runtime carry
// RPCs on new connections and a bulk transfer intact: every wakeup comes
// from the netpoller (arrivals) or Wake (API calls).
func TestXDPNoSpinRuntimeWait(t *testing.T) {
	tb := testbed.NewT(t)
	p, err := tb.NewPair(testbed.VethConfig{})
	if err != nil {
		t.Fatal(err)
	}
	noSpin := func(c *Config) { c.Spin = -1 }
	a := openXDPStackLink(t, p.A, XDPConfig{Interface: p.Veth.A.Name, RuntimeWait: true}, p.Veth.A, noSpin, 1)
	b := openXDPStackLink(t, p.B, XDPConfig{Interface: p.Veth.B.Name, RuntimeWait: true}, p.Veth.B, noSpin, 2)
	l, err := b.Listen(7, 0)
	if err != nil {
		t.Fatal(err)
	}
	echoServer(t, l)
	ipB := p.Veth.B.Addr.Addr().As4()
	for i := 0; i < 200; i++ {
		req := []byte(fmt.Sprintf("rpc %d", i))
		resp, err := call(a, ipB, 7, req)
		if err != nil {
			t.Fatalf("rpc %d: %v", i, err)
		}
		if !bytes.Equal(resp, req) {
			t.Fatalf("rpc %d: echo %q", i, resp)
		}
	}
	big := make([]byte, 4<<20)
	for i := range big {
		big[i] = byte(i*131 + i>>9)
	}
	resp, err := call(a, ipB, 7, big)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(resp, big) {
		t.Fatalf("4 MiB echo: %d bytes back, or different ones", len(resp))
	}
	if w := a.Stats().Wakeups; w == 0 {
		t.Errorf("client never slept on the link (wakeups %d)", w)
	}
}
