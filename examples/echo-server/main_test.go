package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/sockapi"
)

// The server survives every way a client can fail a request: oversized
// (its client gets ErrMessageTooLarge), stalled past the read timeout,
// stalled and still open, and reset by its client; it answers after each.
func TestServeSurvivesBadClients(t *testing.T) {
	cli, srv, err := sockapi.OpenPipe(sockapi.Config{}, netip.MustParseAddr("10.97.0.1"), netip.MustParseAddr("10.97.0.2"))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	defer srv.Close()
	l, err := srv.Listen(7)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.SetMessageConfig(sockapi.MessageConfig{ReadTimeout: 2 * time.Second}); err != nil { // time for 1 MiB under -race
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- serve(l) }()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const addr = "10.97.0.2:7"
	answers := func(what string) {
		t.Helper()
		for i := 0; i < 5; i++ {
			resp, err := cli.Call(ctx, addr, []byte("hello"))
			if err != nil || !bytes.Equal(resp, []byte("hello")) {
				t.Fatalf("after %s: call %d: %q, %v", what, i, resp, err)
			}
		}
		select {
		case err := <-done:
			t.Fatalf("after %s: the server stopped: %v", what, err)
		default:
		}
	}
	answers("start")

	if _, err := cli.Call(ctx, addr, make([]byte, maxMessage+1)); !errors.Is(err, sockapi.ErrMessageTooLarge) {
		t.Fatalf("oversized request: %v, want ErrMessageTooLarge", err)
	}
	answers("an oversized request")

	stalled, err := cli.Dial(ctx, addr) // stays open through the rest
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	if _, err := stalled.Write([]byte("GET")); err != nil {
		t.Fatal(err)
	}
	answers("a stalled request")
	stalled.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := stalled.Read(make([]byte, 8)); !errors.Is(err, sockapi.ErrConnReset) {
		t.Fatalf("stalled request: %v, want a reset at the read timeout", err)
	}
	answers("a timed-out request")

	aborted, err := cli.Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := aborted.Write([]byte("GET 1")); err != nil {
		t.Fatal(err)
	}
	aborted.Abort()
	answers("a reset request")

	st, _ := srv.Stats()
	if m := st.Messages; m.TooLarge != 1 || m.TimedOut != 1 {
		t.Errorf("server messages %+v, want 1 too large and 1 timed out", m)
	}
	l.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Errorf("serve after Close: %v, want net.ErrClosed", err)
	}
}
