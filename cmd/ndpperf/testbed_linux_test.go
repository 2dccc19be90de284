package main

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/internal/testbed"
)

// TestSignalRemovesTestbed: SIGTERM (a timeout) or SIGINT (Ctrl-C) in the
// middle of a run removes the run's namespaces before ndpperf exits, with
// 128 plus the signal's number.
func TestSignalRemovesTestbed(t *testing.T) {
	testbed.RequireRoot(t)
	bin := ndpperfBinary(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		cmd := exec.Command(bin, "pingpong", "--transports", "udp", "--n", "100000000", "--rounds", "1")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		prefix := "ndp" + strconv.Itoa(cmd.Process.Pid) + "-"
		deadline := time.Now().Add(20 * time.Second)
		for len(namespacesWithPrefix(t, prefix)) < 2 {
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatalf("%v: no testbed of pid %d within 20 s", sig, cmd.Process.Pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(200 * time.Millisecond) // into the measurement
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		var err error
		select {
		case err = <-exited:
		case <-time.After(testbedRemoveBound + 5*time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("%v: ndpperf still running %v after the signal", sig, testbedRemoveBound+5*time.Second)
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 128+int(sig) {
			t.Errorf("%v: ndpperf exited with %v, want exit status %d", sig, err, 128+int(sig))
		}
		if left := namespacesWithPrefix(t, prefix); len(left) > 0 {
			t.Errorf("%v: namespaces left behind: %v", sig, left)
			for _, ns := range left {
				_ = exec.Command("ip", "netns", "del", ns).Run()
			}
		}
	}
}

func namespacesWithPrefix(t *testing.T, prefix string) []string {
	t.Helper()
	entries, err := os.ReadDir("/run/netns")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			names = append(names, e.Name())
		}
	}
	return names
}
