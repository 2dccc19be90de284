package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Rate
		ok   bool
	}{
		{"10G", 10e9, true}, {"25Gbit", 25e9, true}, {"1000M", 1e9, true}, {"1.5G", 1.5e9, true},
		{"100000000", 1e8, true}, {" 40gbps ", 40e9, true}, {"10Gbit/s", 10e9, true},
		{"", 0, false}, {"G", 0, false}, {"fast", 0, false}, {"10k", 0, false}, {"NaN", 0, false},
		{"1e30", 0, false}, {"-5G", 0, false}, {"Inf", 0, false},
	} {
		got, err := ParseRate(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("ParseRate(%q) = %v, %v; want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"10G", "1.5M", "1e9", "-1", "0x10", "9999999999999999999T"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRate(s)
		if err == nil && (r < 1e6 || r > 1e13) {
			t.Fatalf("ParseRate(%q) = %d accepted out of range", s, r)
		}
	})
}

func FuzzParseConfig(f *testing.F) {
	f.Add(`{"interface":"eth0","link_rate":"10G","spin":"20us"}`)
	f.Add(`{"queues":[0,1],"core_cpus":[-1,0]}`)
	f.Add(`{"interface":1}`)
	f.Fuzz(func(t *testing.T, s string) {
		c, err := parseConfig(strings.NewReader(s), "fuzz.json")
		if err != nil {
			return
		}
		c.populate()
		c.validate() // must not panic on anything that parsed
	})
}

func writeFile(t *testing.T, content string) string {
	p := filepath.Join(t.TempDir(), "ndpd.json")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConfigFileAndFlags(t *testing.T) {
	p := writeFile(t, `{
  "interface": "veth0",
  "link_rate": "25G",
  "gamma": 0.95,
  "iw": 16,
  "allow_uids": [1000],
  "spin": "10us"
}`)
	var stderr bytes.Buffer
	o, err := parseArgs([]string{"-config", p, "-iw", "8", "--socket", "/tmp/x.sock", "-allow-gids", "10,20"}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	c := o.cfg
	if c.Interface != "veth0" || c.LinkRate != 25e9 || c.Gamma != 0.95 || c.IW != 8 || c.ControlSocket != "/tmp/x.sock" ||
		time.Duration(c.Spin) != 10*time.Microsecond || len(c.AllowUIDs) != 1 || c.AllowUIDs[0] != 1000 ||
		len(c.AllowGIDs) != 2 || c.AllowGIDs[1] != 20 || c.NDPPort != 6420 || len(c.CoreCPUs) != 0 {
		t.Fatalf("effective config %+v", c)
	}
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		args       []string
		want       []string // substrings of the error
	}{
		{"unknown field", `{"interface":"x","bogus":1}`, nil, []string{`unknown field "bogus"`}},
		{"syntax with position", "{\n  \"interface\": \"x\",\n  \"iw\": ,\n}", nil, []string{"ndpd.json:3:"}},
		{"type with position", "{\n\"iw\": \"many\"}", nil, []string{"ndpd.json:2:", `"iw"`}},
		{"bad duration", `{"spin":"fast"}`, nil, []string{"fast"}},
		{"trailing", `{"interface":"x"} {}`, nil, []string{"trailing data"}},
		{"every problem at once", `{"gamma":1.5,"iw":0,"queues":[0,0],"bind":"turbo","mtu":20,"socket_mode":"rw","frame_size":3000,"log_level":"loud"}`, nil,
			[]string{"interface: required", "gamma", "queues", "bind", "mtu", "socket_mode", "frame_size", "log_level"}},
		{"flag overrides are validated", `{"interface":"x"}`, []string{"-gamma", "2", "-core-cpus", "4096", "-poll", "spin"}, []string{"gamma", "core_cpus", "poll"}},
		{"relative socket", `{"interface":"x","control_socket":"ndpd.sock"}`, nil, []string{"control_socket"}},
		{"bad address", `{"interface":"x","address":"::1"}`, nil, []string{"address"}},
		{"negative resolve timeout", `{"interface":"x"}`, []string{"-resolve-timeout", "-1s"}, []string{"resolve_timeout"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, tc.file)
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"-config", p, "--check-config"}, tc.args...), &stdout, &stderr)
			if code == 0 {
				t.Fatalf("exit 0, stdout %s", stdout.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("error %q lacks %q", stderr.String(), w)
				}
			}
		})
	}
}

func TestCheckConfigPrintsEffectiveConfig(t *testing.T) {
	p := writeFile(t, `{"interface":"veth0","link_rate":"10G"}`)
	var stdout, stderr bytes.Buffer
	// veth0 need not exist here: exit 1 (a machine check failed) still
	// prints the effective config; 2 would be an invalid config.
	if code := run([]string{"-config", p, "--check-config", "-gamma", "0.9"}, &stdout, &stderr); code == 2 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var c Config
	dec := json.NewDecoder(&stdout)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("printed config does not parse back: %v", err)
	}
	if c.Interface != "veth0" || c.Gamma != 0.9 || c.IW != 0 || c.ControlSocket != "/run/ndpd/ndpd.sock" || c.FrameSize != 2048 ||
		time.Duration(c.ResolveTimeout) != time.Second {
		t.Fatalf("printed config %+v", c)
	}
}

func TestVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--version"}, &stdout, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), "ndpd ") {
		t.Fatalf("exit %d stdout %q stderr %q", code, stdout.String(), stderr.String())
	}
}

func TestStatusWithoutDaemon(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"status", "-socket", filepath.Join(t.TempDir(), "none.sock")}, &stdout, &stderr)
	if code == 0 || !strings.Contains(stderr.String(), "none.sock") {
		t.Fatalf("exit %d stderr %q", code, stderr.String())
	}
}

func TestExampleConfigIsValid(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"-config", "ndpd.example.json", "--check-config"}, &stdout, &stderr); code == 2 || strings.Contains(stderr.String(), "invalid configuration") {
		t.Fatalf("ndpd.example.json: exit %d: %s", code, stderr.String())
	}
}
