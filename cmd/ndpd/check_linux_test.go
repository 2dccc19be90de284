package main

import (
	"bytes"
	"net"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckEnvironment runs --check-config's machine checks on the
// loopback interface: a config that fits passes, and each thing that does
// not fit fails with its own line.
func TestCheckEnvironment(t *testing.T) {
	dir := t.TempDir()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	served := filepath.Join(dir, "served.sock")
	ul, err := net.Listen("unix", served)
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()

	good := func() Config {
		c := Config{Interface: "lo", ControlSocket: filepath.Join(dir, "run", "ndpd.sock"), MetricsAddr: "127.0.0.1:0",
			PcapFile: filepath.Join(dir, "c.pcapng")}
		c.populate()
		return c
	}
	for _, tc := range []struct {
		name  string
		tweak func(*Config)
		fail  string // "" = every check passes
	}{
		{"fits", func(*Config) {}, ""},
		{"pinned to CPU 0", func(c *Config) { c.CoreCPUs = []int{0} }, ""},
		{"no such interface", func(c *Config) { c.Interface = "nosuchif0" }, `interface "nosuchif0"`},
		{"no such queue", func(c *Config) { c.Queues = []int{7} }, "queue 7 of lo"},
		{"address elsewhere", func(c *Config) { c.Address = "192.0.2.7" }, "address 192.0.2.7 is not on lo"},
		{"mtu above the link's", func(c *Config) { c.MTU = 70000 }, "mtu 70000"},
		{"metrics port taken", func(c *Config) { c.MetricsAddr = busy.Addr().String() }, "metrics_addr"},
		{"capture directory missing", func(c *Config) { c.PcapFile = filepath.Join(dir, "no", "c.pcapng") }, "pcap_file"},
		{"socket already served", func(c *Config) { c.ControlSocket = served }, "already listening"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good()
			tc.tweak(&c)
			res, unchecked := checkEnvironment(&c, "/sys/class/net")
			var out bytes.Buffer
			err := printChecks(&out, res, unchecked)
			if len(unchecked) == 0 || !strings.Contains(out.String(), "not checked: AF_XDP") {
				t.Errorf("report does not say what it could not check:\n%s", out.String())
			}
			if tc.fail == "" {
				if err != nil {
					t.Fatalf("%v:\n%s", err, out.String())
				}
				return
			}
			if err == nil {
				t.Fatalf("no failure, want one about %q:\n%s", tc.fail, out.String())
			}
			found := false
			for _, line := range strings.Split(out.String(), "\n") {
				found = found || (strings.HasPrefix(line, "FAIL") && strings.Contains(line, tc.fail))
			}
			if !found {
				t.Fatalf("no FAIL line about %q:\n%s", tc.fail, out.String())
			}
		})
	}
}
