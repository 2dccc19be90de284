package ndp

import (
	"testing"
	"time"
)

// Manual driving helpers for mechanism tests.

type rec struct {
	b      []byte
	f      Frame
	pushed bool
}

var (
	ipA = [4]byte{10, 0, 0, 1}
	ipB = [4]byte{10, 0, 0, 2}
)

func mkEP(t testing.TB, ip [4]byte, mod func(*Config)) *Endpoint {
	t.Helper()
	// The mechanism tests count in the paper's window of 30 packets, not
	// the MTU 1500 default (DefaultIW).
	cfg := Config{LocalIP: ip, LocalMAC: [6]byte{2, 0, 0, 0, 0, ip[3]}, Seed: uint64(ip[3]), IW: 30}
	if mod != nil {
		mod(&cfg)
	}
	ep, err := NewEndpoint(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

func addrOf(ep *Endpoint, port uint16) Addr {
	return Addr{MAC: ep.cfg.LocalMAC, IP: ep.cfg.LocalIP, Port: port}
}

// poll drains every frame ep wants to send.
func poll(t testing.TB, ep *Endpoint, now Time, allowPush bool) []rec {
	t.Helper()
	var out []rec
	buf := make([]byte, MaxFrameLen(ep.cfg.MTU))
	for {
		n, pushed := ep.PollFrame(buf, now, allowPush)
		if n == 0 {
			return out
		}
		r := rec{b: append([]byte(nil), buf[:n]...), pushed: pushed}
		if err := ParseFrame(r.b, &r.f); err != nil {
			t.Fatalf("invalid frame from endpoint: %v", err)
		}
		out = append(out, r)
	}
}

func deliver(t testing.TB, ep *Endpoint, now Time, rs ...rec) {
	t.Helper()
	for _, r := range rs {
		ep.HandleFrame(r.b, now)
	}
}

func events(ep *Endpoint) []Event {
	var out []Event
	for {
		ev, ok := ep.PollEvent()
		if !ok {
			return out
		}
		out = append(out, ev)
	}
}

func ofType(rs []rec, t PacketType) []rec {
	var out []rec
	for _, r := range rs {
		if r.f.Header.Type == t {
			out = append(out, r)
		}
	}
	return out
}

func findEvent(evs []Event, k EventKind) (Event, bool) {
	for _, e := range evs {
		if e.Kind == k {
			return e, true
		}
	}
	return Event{}, false
}

func countPulls(evs []Event) int {
	n := 0
	for _, e := range evs {
		if e.Kind == EventPulls {
			n += e.Count
		}
	}
	return n
}

const us = Time(time.Microsecond)
const ms = Time(time.Millisecond)
