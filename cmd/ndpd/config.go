package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ndpstack/ndpstack/internal/units"
	"github.com/ndpstack/ndpstack/ndp"
)

// Config is ndpd's configuration: the config file (JSON, see
// docs/decisions.md for why) with command-line flags on top. Every zero
// field takes the default documented next to it; validate reports every
// problem at once.
type Config struct {
	// Interface is the network interface ndpd opens with AF_XDP. Required.
	Interface string `json:"interface"`
	// Queues are the interface queues to serve, each by its own core loop
	// (its own AF_XDP socket, UMEM, engine stack and buffer pool); every
	// application is attached to every queue. At most 64, distinct.
	// Default [0]. A NIC must keep each connection's frames on one queue
	// although NDP sprays UDP source ports: hash UDP on addresses only
	// (README.md, "Running ndpd"; ndpd refuses several queues otherwise).
	Queues []int `json:"queues"`
	// CoreCPUs pins the core loop of Queues[i] to CoreCPUs[i] (-1:
	// unpinned); one entry per queue. The core loop also releases the pull
	// queue's PULLs (there is no separate pacing thread). Default: none
	// pinned.
	CoreCPUs []int `json:"core_cpus"`
	// StallTimeout: a queue's core loop that does not iterate for this long
	// is stuck, and ndpd stops (queues share fate: every application gets
	// ErrDaemonGone and ndpd exits 1). Default 2s; "-1ns" = no watchdog.
	StallTimeout Duration `json:"stall_timeout"`
	// Address is the local IPv4 address NDP uses. Default: the interface's
	// first IPv4 address.
	Address string `json:"address"`
	// NDPPort is the UDP port of NDP frames (both ends). Default 6420.
	NDPPort uint16 `json:"ndp_port"`
	// MTU of NDP frames, at most the link's. Default: the link's (1500 on
	// veth). Above 3826 frames cross AF_XDP as multi-buffer chains, about
	// 1 µs more per crossing in copy mode, a one-frame packet's too
	// (docs/datapath.md, "Jumbo frames").
	MTU int `json:"mtu"`
	// LinkRate paces PULLs: "10G", "25Gbit", "1000M", or bits/s. Default 10G.
	LinkRate Rate `json:"link_rate"`
	// Gamma is the HULL headroom factor in (0, 1]. Default 1.
	Gamma float64 `json:"gamma"`
	// IW is NDP's initial window in packets, [1, 1024]. Default (0):
	// ndp.DefaultIW of the MTU, 93 packets at MTU 1500 and 30 at 9000, as
	// an embedded stack's.
	IW int `json:"iw"`
	// TrimDSCPs are the DSCP values (0..63, at most 4) a commodity switch
	// writes into the frames it trims (packet trimming without NDP's flag,
	// ndp.CommodityTrim): such a frame is taken as a trimmed header. Setting
	// them also marks NDP's frames for the switch: DataDSCP on DATA with
	// payload, ControlDSCP on everything else. Default none (off).
	TrimDSCPs   []uint8 `json:"trim_dscps"`
	DataDSCP    uint8   `json:"data_dscp"`
	ControlDSCP uint8   `json:"control_dscp"`
	// UserTimeout is how long a connection that expects something from its
	// peer may hear nothing from it before it fails (ndp.Config.UserTimeout),
	// [1ms, 1h]. Default 30s.
	UserTimeout Duration `json:"user_timeout"`
	// Policy is the pull queue's scheduling: "fair" (default), "priority"
	// (strict classes) or "deadline" (D3 rate allocation, EDF).
	Policy string `json:"policy"`
	// Bind is the AF_XDP bind mode: "auto" (default), "copy", "zerocopy".
	Bind string `json:"bind"`
	// Attach is the XDP attach mode: "auto" (default), "native", "generic".
	Attach string `json:"attach"`

	// ControlSocket is the Unix socket applications attach to. Default
	// /run/ndpd/ndpd.sock (the directory is created 0755 if missing).
	ControlSocket string `json:"control_socket"`
	// SocketMode is the socket file's permission bits, octal string.
	// Default "0660".
	SocketMode string `json:"socket_mode"`
	// SocketGroup is the gid to chown the socket file to (0 = keep).
	SocketGroup int `json:"socket_group"`
	// AllowUIDs and AllowGIDs: peers (SO_PEERCRED) allowed to attach or
	// query status. Both empty = only ndpd's own uid.
	AllowUIDs []uint32 `json:"allow_uids"`
	AllowGIDs []uint32 `json:"allow_gids"`

	// Frames and FrameSize size the shared buffer area. Default 8192 x 2048.
	Frames    uint32 `json:"frames"`
	FrameSize uint32 `json:"frame_size"`
	// AppFrames is each application's TX partition. Default 256.
	AppFrames uint32 `json:"app_frames"`
	// SocketsPerApp bounds one application's open sockets (half dial, half
	// accept). Default 64.
	SocketsPerApp int `json:"sockets_per_app"`
	// Poll says how the core loop waits for work: "adaptive" (default)
	// spins for Spin after its last work, then sleeps until a ring, the NIC
	// or a timer needs it, for hosts where ndpd shares CPUs with its
	// applications; "busy" never sleeps, for a core loop on a CPU of its
	// own (pin it with core_cpus): every hop from an application or the NIC
	// is taken without a wakeup, at the price of that CPU.
	Poll string `json:"poll"`
	// Spin is the core's adaptive-polling spin before sleeping (it yields
	// the CPU between idle polls). "0s" = the default, 50us; "-1ns" = never
	// spin. The window grows (doubling, up to 1ms) while sleeps are cut
	// short by traffic and shrinks back to Spin when the core idles
	// (daemon.Config.SpinFor). Ignored with poll "busy".
	Spin Duration `json:"spin"`
	// DrainTimeout bounds the graceful drain on SIGTERM. Default 5s.
	DrainTimeout Duration `json:"drain_timeout"`
	// ResolveTimeout bounds one neighbour resolution (ARP through the
	// kernel) for a dial to a peer not yet resolved; the dial fails with
	// "neighbour unreachable" after it. Resolutions run off the core loop
	// (at most 4 at once). Default 1s.
	ResolveTimeout Duration `json:"resolve_timeout"`

	// MetricsAddr, if set, is the HOST:PORT ndpd serves Prometheus
	// metrics on (GET /metrics; internal/metrics lists the series). Empty
	// (the default): no metrics server.
	MetricsAddr string `json:"metrics_addr"`
	// PcapFile, if set, is a pcapng file ndpd writes every frame its stack
	// sends and receives to (contrib/wireshark/ndp.lua decodes them). The
	// core loop never waits for the disk: frames that find the capture
	// buffer full are left out of the file and counted. Empty (the
	// default): no capture.
	PcapFile string `json:"pcap_file"`
	// PcapMaxBytes bounds the capture file: capture stops once the next
	// frame would take the file past it. Default 64 MiB.
	PcapMaxBytes int64 `json:"pcap_max_bytes"`

	// LogLevel: debug, info (default), warn, error. LogFormat: json
	// (default) or console.
	LogLevel  string `json:"log_level"`
	LogFormat string `json:"log_format"`
}

// Duration is a time.Duration written as a Go duration string in JSON.
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"50us\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

func (d *Duration) String() string { return time.Duration(*d).String() }
func (d *Duration) Set(s string) error {
	v, err := time.ParseDuration(s)
	*d = Duration(v)
	return err
}

// Rate is a link rate in bits per second, written "10G", "25Gbit",
// "100M", "1.5G" or a plain number of bits/s.
type Rate int64

// ParseRate parses a rate (internal/units grammar) in [1M, 10T] bit/s.
// It never panics; errors name the input.
func ParseRate(s string) (Rate, error) {
	bps, err := units.ParseRate(s)
	if err != nil {
		return 0, fmt.Errorf("link rate: %w", err)
	}
	if bps < 1e6 || bps > 1e13 {
		return 0, fmt.Errorf("link rate %q: %g bit/s outside [1M, 10T]", s, bps)
	}
	return Rate(bps), nil
}

func (r Rate) String() string {
	switch {
	case r >= 1e9 && r%1e9 == 0:
		return strconv.FormatInt(int64(r/1e9), 10) + "G"
	case r >= 1e6 && r%1e6 == 0:
		return strconv.FormatInt(int64(r/1e6), 10) + "M"
	}
	return strconv.FormatInt(int64(r), 10)
}

func (r Rate) MarshalJSON() ([]byte, error) { return json.Marshal(r.String()) }

func (r *Rate) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n float64
		if err2 := json.Unmarshal(b, &n); err2 != nil {
			return fmt.Errorf("link rate must be a string like \"10G\" or a number of bits/s")
		}
		s = strconv.FormatFloat(n, 'f', -1, 64)
	}
	v, err := ParseRate(s)
	*r = v
	return err
}

func (r *Rate) Set(s string) error {
	v, err := ParseRate(s)
	*r = v
	return err
}

// LoadConfig reads a JSON config file strictly: unknown fields, trailing
// data and type errors are errors with the file name and position.
func LoadConfig(path string) (Config, error) {
	var c Config
	f, err := os.Open(path)
	if err != nil {
		return c, err
	}
	defer f.Close()
	return parseConfig(f, path)
}

func parseConfig(r io.Reader, name string) (Config, error) {
	var c Config
	data, err := io.ReadAll(io.LimitReader(r, 1<<20))
	if err != nil {
		return c, fmt.Errorf("%s: %w", name, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			line, col := position(data, se.Offset)
			return c, fmt.Errorf("%s:%d:%d: %v", name, line, col, err)
		case errors.As(err, &te):
			line, col := position(data, te.Offset)
			return c, fmt.Errorf("%s:%d:%d: field %q: %v", name, line, col, te.Field, err)
		}
		return c, fmt.Errorf("%s: %w", name, err)
	}
	if dec.More() {
		return c, fmt.Errorf("%s: trailing data after the config object", name)
	}
	return c, nil
}

func position(data []byte, off int64) (line, col int) {
	line, col = 1, 1
	for i := int64(0); i < off && i < int64(len(data)); i++ {
		if data[i] == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}

// populate fills defaults.
func (c *Config) populate() {
	if len(c.Queues) == 0 {
		c.Queues = []int{0}
	}
	if c.NDPPort == 0 {
		c.NDPPort = ndp.DefaultPort
	}
	if c.LinkRate == 0 {
		c.LinkRate = 10e9
	}
	if c.Gamma == 0 {
		c.Gamma = 1
	}
	if c.UserTimeout == 0 {
		c.UserTimeout = Duration(30 * time.Second)
	}
	if c.Policy == "" {
		c.Policy = "fair"
	}
	if c.Poll == "" {
		c.Poll = "adaptive"
	}
	if c.Bind == "" {
		c.Bind = "auto"
	}
	if c.Attach == "" {
		c.Attach = "auto"
	}
	if c.ControlSocket == "" {
		c.ControlSocket = "/run/ndpd/ndpd.sock"
	}
	if c.SocketMode == "" {
		c.SocketMode = "0660"
	}
	if len(c.AllowUIDs) == 0 && len(c.AllowGIDs) == 0 {
		c.AllowUIDs = []uint32{uint32(os.Geteuid())}
	}
	if c.Frames == 0 {
		c.Frames = 8192
	}
	if c.FrameSize == 0 {
		c.FrameSize = 2048
	}
	if c.AppFrames == 0 {
		c.AppFrames = 256
	}
	if c.SocketsPerApp == 0 {
		c.SocketsPerApp = 64
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = Duration(5 * time.Second)
	}
	if c.StallTimeout == 0 {
		c.StallTimeout = Duration(2 * time.Second)
	}
	if c.ResolveTimeout == 0 {
		c.ResolveTimeout = Duration(time.Second)
	}
	if c.PcapMaxBytes == 0 {
		c.PcapMaxBytes = 64 << 20
	}
	if c.LogLevel == "" {
		c.LogLevel = "info"
	}
	if c.LogFormat == "" {
		c.LogFormat = "json"
	}
}

// ConfigError lists every invalid field.
type ConfigError struct{ Problems []string }

func (e *ConfigError) Error() string {
	return "invalid configuration:\n  " + strings.Join(e.Problems, "\n  ")
}

// validate checks a populated config.
func (c *Config) validate() error {
	var p []string
	bad := func(format string, a ...any) { p = append(p, fmt.Sprintf(format, a...)) }
	if c.Interface == "" {
		bad("interface: required (the interface ndpd serves, e.g. \"eth0\")")
	}
	if len(c.Queues) > 64 {
		bad("queues: %d queues: at most 64", len(c.Queues))
	}
	for i, q := range c.Queues {
		if q < 0 || q > 1023 {
			bad("queues: %d outside [0, 1023]", q)
		} else if slices.Contains(c.Queues[:i], q) {
			bad("queues: %d listed twice", q)
		}
	}
	if len(c.CoreCPUs) > 0 {
		if len(c.CoreCPUs) != len(c.Queues) {
			bad("core_cpus: %v: want one CPU per queue (%d)", c.CoreCPUs, len(c.Queues))
		}
		for _, cpu := range c.CoreCPUs {
			if cpu < -1 || cpu >= runtime.NumCPU() {
				bad("core_cpus: %d: want -1 (unpinned) or a CPU in [0, %d)", cpu, runtime.NumCPU())
			}
		}
	}
	if c.Address != "" {
		if a, err := netip.ParseAddr(c.Address); err != nil || !a.Is4() || a.IsUnspecified() {
			bad("address: %q is not a unicast IPv4 address", c.Address)
		}
	}
	if c.MTU != 0 && (c.MTU < 576 || c.MTU > 9216) {
		bad("mtu: %d outside [576, 9216]", c.MTU)
	}
	if c.LinkRate < 1e6 || c.LinkRate > 1e13 {
		bad("link_rate: %v outside [1M, 10T]", c.LinkRate)
	}
	if !(c.Gamma > 0 && c.Gamma <= 1) {
		bad("gamma: %v outside (0, 1]", c.Gamma)
	}
	if c.IW < 0 || c.IW > 1024 {
		bad("iw: %d outside [1, 1024] (0: the default)", c.IW)
	}
	if len(c.TrimDSCPs) > 4 || c.DataDSCP > 63 || c.ControlDSCP > 63 || slices.ContainsFunc(c.TrimDSCPs, func(d uint8) bool { return d > 63 }) {
		bad("trim_dscps, data_dscp, control_dscp: DSCP values are 0..63, at most 4 trim_dscps")
	}
	if c.Poll != "adaptive" && c.Poll != "busy" {
		bad("poll: %q: want adaptive or busy", c.Poll)
	}
	if ut := time.Duration(c.UserTimeout); ut < time.Millisecond || ut > time.Hour {
		bad("user_timeout: %v outside [1ms, 1h]", ut)
	}
	if c.Policy != "fair" && c.Policy != "priority" && c.Policy != "deadline" {
		bad("policy: %q: want fair, priority or deadline", c.Policy)
	}
	if c.Bind != "auto" && c.Bind != "copy" && c.Bind != "zerocopy" {
		bad("bind: %q: want auto, copy or zerocopy", c.Bind)
	}
	if c.Attach != "auto" && c.Attach != "native" && c.Attach != "generic" {
		bad("attach: %q: want auto, native or generic", c.Attach)
	}
	if !strings.HasPrefix(c.ControlSocket, "/") || len(c.ControlSocket) > 107 {
		bad("control_socket: %q: want an absolute path of at most 107 bytes", c.ControlSocket)
	}
	if m, err := strconv.ParseUint(c.SocketMode, 8, 32); err != nil || m > 0o777 {
		bad("socket_mode: %q: want octal permission bits like \"0660\"", c.SocketMode)
	}
	if c.SocketGroup < 0 {
		bad("socket_group: %d < 0", c.SocketGroup)
	}
	if c.FrameSize < 2048 || c.FrameSize > 65536 || c.FrameSize&(c.FrameSize-1) != 0 {
		bad("frame_size: %d: want a power of two in [2048, 65536]", c.FrameSize)
	}
	if c.AppFrames < 16 {
		bad("app_frames: %d < 16", c.AppFrames)
	}
	if c.Frames < 2*c.AppFrames || c.Frames > 1<<22 {
		bad("frames: %d: want [2*app_frames, 4194304] (half RX, half application partitions)", c.Frames)
	}
	if c.SocketsPerApp < 2 || c.SocketsPerApp > 4096 {
		bad("sockets_per_app: %d outside [2, 4096]", c.SocketsPerApp)
	}
	if c.DrainTimeout < 0 {
		bad("drain_timeout: negative")
	}
	if c.StallTimeout > 0 && time.Duration(c.StallTimeout) < 100*time.Millisecond {
		bad("stall_timeout: %v < 100ms (a loop may sleep 10ms; scheduling delays are not stalls)", time.Duration(c.StallTimeout))
	}
	if c.ResolveTimeout < 0 {
		bad("resolve_timeout: negative")
	}
	if c.MetricsAddr != "" {
		if _, port, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			bad("metrics_addr: %q: want HOST:PORT (%v)", c.MetricsAddr, err)
		} else if n, err := strconv.ParseUint(port, 10, 16); err != nil || (n == 0 && port != "0") {
			bad("metrics_addr: %q: port %q is not a port number", c.MetricsAddr, port)
		}
	}
	if c.PcapMaxBytes < 64<<10 {
		bad("pcap_max_bytes: %d < 65536", c.PcapMaxBytes)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		bad("log_level: %q: want debug, info, warn or error", c.LogLevel)
	}
	if c.LogFormat != "json" && c.LogFormat != "console" {
		bad("log_format: %q: want json or console", c.LogFormat)
	}
	if len(p) > 0 {
		return &ConfigError{Problems: p}
	}
	return nil
}

// coreCPUs is the CPU of each queue's core loop (-1: unpinned), after validate.
func (c *Config) coreCPUs() []int {
	if len(c.CoreCPUs) > 0 {
		return c.CoreCPUs
	}
	cpus := make([]int, len(c.Queues))
	for i := range cpus {
		cpus[i] = -1
	}
	return cpus
}

// socketMode returns the parsed permission bits (after validate).
func (c *Config) socketMode() os.FileMode {
	m, _ := strconv.ParseUint(c.SocketMode, 8, 32)
	return os.FileMode(m)
}
