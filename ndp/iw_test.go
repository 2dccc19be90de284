package ndp

import "testing"

// The default initial window carries at least DefaultIWBytes of payload and
// never fewer than the paper's 30 packets: 93 packets at MTU 1500, 30 at
// MTU 9000, and a new connection pushes exactly that many at once.
func TestDefaultIW(t *testing.T) {
	for _, tc := range []struct{ mtu, iw int }{{1500, 93}, {3826, 35}, {9000, 30}, {0, 93}} {
		ep := mkEP(t, ipA, func(c *Config) { c.MTU, c.IW, c.SendBuffer = tc.mtu, 0, 2<<20 })
		iw := ep.Config().IW
		if iw != tc.iw {
			t.Fatalf("MTU %d: default IW %d, want %d", tc.mtu, iw, tc.iw)
		}
		if mtu := ep.Config().MTU; iw*MaxPayload(mtu) < DefaultIWBytes && iw != 30 {
			t.Fatalf("MTU %d: IW %d carries %d bytes, below DefaultIWBytes", mtu, iw, iw*MaxPayload(mtu))
		}
		b := mkEP(t, ipB, func(c *Config) { c.MTU, c.IW, c.SendBuffer = tc.mtu, 0, 2<<20 })
		dialWrite(t, ep, b, 200*ep.MSS(), DialOptions{})
		if out := poll(t, ep, 0, true); len(out) != tc.iw {
			t.Fatalf("MTU %d: pushed %d packets in the first RTT, want %d", tc.mtu, len(out), tc.iw)
		}
	}
	if DefaultIW(1500) != 93 || DefaultIW(100000) != 30 {
		t.Fatalf("DefaultIW(1500) %d, DefaultIW(100000) %d", DefaultIW(1500), DefaultIW(100000))
	}
}
