package sockapi

import (
	"context"
	"testing"
	"time"
)

// Both ends know their own address: a dialed connection reports the local port the
// endpoint chose, an accepted one the listened port, and each side's remote is the
// other's local.
func TestLocalAndRemoteAddrs(t *testing.T) {
	a, b := pipe(t)
	l, err := b.Listen(80)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := a.Dial(ctx, addrB.String()+":80")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	s, err := l.AcceptNDP()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cl, cr := c.LocalAddr().(Addr), c.RemoteAddr().(Addr)
	sl, sr := s.LocalAddr().(Addr), s.RemoteAddr().(Addr)
	if cl.Port == 0 {
		t.Fatalf("dialed conn's local port is 0 (%v)", cl)
	}
	if sl.Port != 80 || cr.Port != 80 {
		t.Fatalf("listened port: server local %v, client remote %v", sl, cr)
	}
	if sr != cl || cr != sl {
		t.Fatalf("addresses do not mirror: client %v -> %v, server %v -> %v", cl, cr, sl, sr)
	}
}
