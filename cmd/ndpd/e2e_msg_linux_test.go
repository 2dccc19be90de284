package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/sockapi"
)

// msgServeMain is the "msgserve" helper: an application behind ndpd that
// echoes messages on NDPD_E2E_PORT with sockapi's RecvMessage loop.
func msgServeMain() int {
	s, err := sockapi.Attach(os.Getenv("NDPD_E2E_SOCKET"))
	if err != nil {
		fmt.Printf("attach-error %v\n", err)
		return 3
	}
	defer s.Close()
	var port uint16
	fmt.Sscan(os.Getenv("NDPD_E2E_PORT"), &port)
	l, err := s.Listen(port)
	if err != nil {
		fmt.Printf("listen-error %v\n", err)
		return 4
	}
	fmt.Println("ready")
	for {
		m, err := l.RecvMessage(1 << 20)
		if err != nil {
			return 0
		}
		m.Reply(m.Data)
	}
}

// attachStack is sockapi.Attach, closed at the end of the test.
func attachStack(t *testing.T, sock string) *sockapi.Stack {
	t.Helper()
	s, err := sockapi.Attach(sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// An application behind ndpd stopped with SIGSTOP while 8 callers flood
// it with 64 KiB messages, and a stalled sender on the other application:
// the other application behind the same ndpd (a RecvMessage server)
// answers every Call, and resets an oversized message with the reason its
// client sees (ErrMessageTooLarge).
func TestE2EStoppedAppBesideLiveOne(t *testing.T) {
	e := newE2E(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const stoppedPort, livePort = 9, 7
	victim := exec.Command(exe, "-test.run=^$")
	victim.Env = append(os.Environ(), "NDPD_E2E_HELPER=msgserve", "NDPD_E2E_SOCKET="+e.b.sock,
		fmt.Sprintf("NDPD_E2E_PORT=%d", stoppedPort))
	out, _ := victim.StdoutPipe()
	victim.Stderr = os.Stderr
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		victim.Process.Kill()
		victim.Wait()
	}()
	if line, _ := bufio.NewReader(out).ReadString('\n'); strings.TrimSpace(line) != "ready" {
		t.Fatalf("stopped app: %q", line)
	}

	srv := attachStack(t, e.b.sock)
	l, err := srv.Listen(livePort)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() {
		for {
			m, err := l.RecvMessage(1 << 20)
			if err != nil {
				served <- err
				return
			}
			m.Reply(m.Data)
		}
	}()
	cli := attachStack(t, e.a.sock)
	host := e.remote.Addr().String()
	live, stopped := fmt.Sprintf("%s:%d", host, livePort), fmt.Sprintf("%s:%d", host, stoppedPort)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.Call(ctx, stopped, []byte("before")); err != nil {
		t.Fatalf("stopped app before SIGSTOP: %v", err)
	}

	// A stalled sender on the live app: part of a message, kept open.
	stall, err := cli.Dial(ctx, live)
	if err != nil {
		t.Fatal(err)
	}
	defer stall.Close()
	if _, err := stall.Write(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}

	victim.Process.Signal(syscall.SIGSTOP)
	defer victim.Process.Signal(syscall.SIGCONT)
	flood, stopFlood := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			big := make([]byte, 64<<10)
			for flood.Err() == nil {
				c, cancel := context.WithTimeout(flood, 500*time.Millisecond)
				cli.Call(c, stopped, big) // fails: the app is stopped
				cancel()
			}
		}()
	}
	var failed []error
	for i := 0; i < 100; i++ {
		req := []byte(fmt.Sprintf("live %d", i))
		resp, err := cli.Call(ctx, live, req)
		if err == nil && !bytes.Equal(resp, req) {
			err = fmt.Errorf("response %q", resp)
		}
		if err != nil {
			failed = append(failed, fmt.Errorf("call %d: %w", i, err))
		}
	}
	stopFlood()
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d of 100 calls to the live app failed while the other was stopped: %v", len(failed), errors.Join(failed...))
	}
	select {
	case err := <-served:
		t.Fatalf("the live app's RecvMessage ended: %v", err)
	default:
	}
	// An oversized message: reset by the live app's message server, with
	// the reason carried through both daemons.
	if _, err := cli.Call(ctx, live, make([]byte, 1<<20+1)); !errors.Is(err, sockapi.ErrMessageTooLarge) {
		t.Errorf("oversized message to the live app: %v, want ErrMessageTooLarge", err)
	}
	if _, err := cli.Call(ctx, live, []byte("after")); err != nil {
		t.Errorf("call after the oversized message: %v", err)
	}
	st, _ := srv.Stats()
	if st.Messages.Received < 101 || st.Messages.TooLarge != 1 {
		t.Errorf("live app's messages %+v, want at least 101 received and 1 too large", st.Messages)
	}
}
