// Command ndpd is the NDP core process (NDP paper, section 4): it owns one
// interface queue through AF_XDP, runs the NDP endpoint, the pull queue and
// the edge pacer in one polling loop, and serves applications that attach
// over a Unix control socket and then talk to it through shared-memory
// rings (package internal/daemon has the protocol).
//
//	ndpd [-config file] [flags]      run the daemon
//	ndpd --check-config [flags]      validate, print the effective config (stdout) and
//	                                 check it against this machine (stderr; exit 1 on a failure)
//	ndpd --version
//	ndpd status [-socket path]       print a running daemon's status (JSON)
//
// Signals: SIGTERM/SIGINT drain gracefully (stop accepting applications,
// connections and listeners; let open connections finish up to
// drain_timeout; exit 0); SIGUSR1 logs a status snapshot.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/ndpstack/ndpstack/internal/daemon"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3";
// otherwise the module version or VCS revision from the build info is used.
var version = ""

func versionString() string {
	v := version
	bi, ok := debug.ReadBuildInfo()
	if v == "" && ok {
		v = bi.Main.Version
	}
	rev, dirty := "", false
	if ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		v += " " + rev
		if dirty {
			v += "-dirty"
		}
	}
	goVersion := "unknown"
	if ok {
		goVersion = bi.GoVersion
	}
	return fmt.Sprintf("ndpd %s (%s)", v, goVersion)
}

// uintList is a flag taking comma-separated unsigned integers.
type uintList []uint32

func (l *uintList) String() string { return fmt.Sprint([]uint32(*l)) }
func (l *uintList) Set(s string) error {
	*l = (*l)[:0]
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.ParseUint(f, 10, 32)
		if err != nil {
			return fmt.Errorf("%q is not a uid/gid", f)
		}
		*l = append(*l, uint32(v))
	}
	return nil
}

// intList is a flag taking comma-separated ints.
type intList []int

func (l *intList) String() string { return fmt.Sprint([]int(*l)) }
func (l *intList) Set(s string) error {
	*l = (*l)[:0]
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return fmt.Errorf("%q is not a number", f)
		}
		*l = append(*l, v)
	}
	return nil
}

// options is what the command line asked for.
type options struct {
	cfg         Config
	configPath  string
	version     bool
	checkConfig bool
}

// parseArgs parses flags into opts: the config file first, then every flag
// the user set on top of it.
func parseArgs(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("ndpd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.configPath, "config", "", "config file (JSON; see docs/decisions.md '## internal/daemon and ndpd')")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	fs.BoolVar(&o.checkConfig, "check-config", false, "validate the configuration, print the effective config, check the interface, queue, address, CPU, socket directory, metrics address and capture directory on this machine, and exit (2: invalid, 1: a check failed)")
	var f Config
	fs.StringVar(&f.Interface, "interface", "", "network interface to serve")
	fs.Var((*intList)(&f.Queues), "queues", "interface queues, comma-separated, each served by its own core loop (default 0)")
	fs.Var((*intList)(&f.CoreCPUs), "core-cpus", "CPU of each queue's core loop, comma-separated in -queues order (-1: unpinned)")
	fs.Var(&f.StallTimeout, "stall-timeout", "a core loop that does not iterate this long is stuck: ndpd stops (default 2s; -1ns = never)")
	fs.StringVar(&f.Address, "address", "", "local IPv4 address (default: the interface's first)")
	ndpPort := fs.Uint("ndp-port", 0, "UDP port of NDP frames (default 6420)")
	fs.IntVar(&f.MTU, "mtu", 0, "MTU (default: the link's)")
	fs.Var(&f.LinkRate, "link-rate", "link rate, e.g. 10G (pull pacing)")
	fs.Float64Var(&f.Gamma, "gamma", 0, "HULL headroom factor in (0,1] (default 1)")
	fs.IntVar(&f.IW, "iw", 0, "initial window in packets (default: 93 at MTU 1500, 30 at MTU 9000)")
	fs.Var(&f.UserTimeout, "user-timeout", "how long a connection waiting on a silent peer lives before it fails (default 30s)")
	fs.StringVar(&f.Policy, "policy", "", "pull scheduling: fair, priority, deadline")
	fs.StringVar(&f.Bind, "bind", "", "AF_XDP bind mode: auto, copy, zerocopy")
	fs.StringVar(&f.Attach, "attach", "", "XDP attach mode: auto, native, generic")
	fs.StringVar(&f.ControlSocket, "socket", "", "control socket path (default /run/ndpd/ndpd.sock)")
	fs.StringVar(&f.SocketMode, "socket-mode", "", "control socket permission bits, octal (default 0660)")
	fs.IntVar(&f.SocketGroup, "socket-group", 0, "gid owning the control socket (0 = keep)")
	fs.Var((*uintList)(&f.AllowUIDs), "allow-uids", "uids allowed to attach, comma-separated")
	fs.Var((*uintList)(&f.AllowGIDs), "allow-gids", "gids allowed to attach, comma-separated")
	fs.StringVar(&f.Poll, "poll", "", "core loop waiting: adaptive (spin, then sleep; default) or busy (never sleep: a CPU of its own, see -core-cpus)")
	fs.Var(&f.Spin, "spin", "core adaptive-polling spin before sleeping, yielding the CPU between polls (default 50us; -1ns = never)")
	fs.Var(&f.DrainTimeout, "drain-timeout", "graceful drain bound on SIGTERM (default 5s)")
	fs.Var(&f.ResolveTimeout, "resolve-timeout", "bound of one neighbour (ARP) resolution for a dial (default 1s)")
	fs.StringVar(&f.MetricsAddr, "metrics-addr", "", "serve Prometheus metrics on HOST:PORT (/metrics); default off")
	fs.StringVar(&f.PcapFile, "pcap", "", "write every frame the stack sends and receives to this pcapng file; default off")
	fs.Int64Var(&f.PcapMaxBytes, "pcap-max-bytes", 0, "capture stops when the file would grow past this (default 64 MiB)")
	fs.StringVar(&f.LogLevel, "log-level", "", "debug, info, warn, error")
	fs.StringVar(&f.LogFormat, "log-format", "", "json or console")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (subcommands: status)", fs.Arg(0))
	}
	if o.configPath != "" {
		c, err := LoadConfig(o.configPath)
		if err != nil {
			return nil, err
		}
		o.cfg = c
	}
	// Flags the user set override the file.
	var perr error
	fs.Visit(func(fl *flag.Flag) {
		c := &o.cfg
		switch fl.Name {
		case "interface":
			c.Interface = f.Interface
		case "queues":
			c.Queues = f.Queues
		case "core-cpus":
			c.CoreCPUs = f.CoreCPUs
		case "stall-timeout":
			c.StallTimeout = f.StallTimeout
		case "address":
			c.Address = f.Address
		case "ndp-port":
			if *ndpPort > 0xffff {
				perr = fmt.Errorf("-ndp-port %d > 65535", *ndpPort)
			}
			c.NDPPort = uint16(*ndpPort)
		case "mtu":
			c.MTU = f.MTU
		case "link-rate":
			c.LinkRate = f.LinkRate
		case "gamma":
			c.Gamma = f.Gamma
		case "iw":
			c.IW = f.IW
		case "user-timeout":
			c.UserTimeout = f.UserTimeout
		case "policy":
			c.Policy = f.Policy
		case "bind":
			c.Bind = f.Bind
		case "attach":
			c.Attach = f.Attach
		case "socket":
			c.ControlSocket = f.ControlSocket
		case "socket-mode":
			c.SocketMode = f.SocketMode
		case "socket-group":
			c.SocketGroup = f.SocketGroup
		case "allow-uids":
			c.AllowUIDs = f.AllowUIDs
		case "allow-gids":
			c.AllowGIDs = f.AllowGIDs
		case "poll":
			c.Poll = f.Poll
		case "spin":
			c.Spin = f.Spin
		case "drain-timeout":
			c.DrainTimeout = f.DrainTimeout
		case "resolve-timeout":
			c.ResolveTimeout = f.ResolveTimeout
		case "metrics-addr":
			c.MetricsAddr = f.MetricsAddr
		case "pcap":
			c.PcapFile = f.PcapFile
		case "pcap-max-bytes":
			c.PcapMaxBytes = f.PcapMaxBytes
		case "log-level":
			c.LogLevel = f.LogLevel
		case "log-format":
			c.LogFormat = f.LogFormat
		}
	})
	if perr != nil {
		return nil, perr
	}
	o.cfg.populate()
	return o, nil
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without os.Exit, for tests.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "status" {
		return runStatus(args[1:], stdout, stderr)
	}
	o, err := parseArgs(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "ndpd: %v\n", err)
		return 2
	}
	if o.version {
		fmt.Fprintln(stdout, versionString())
		return 0
	}
	if err := o.cfg.validate(); err != nil {
		fmt.Fprintf(stderr, "ndpd: %v\n", err)
		return 2
	}
	if o.checkConfig {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(&o.cfg)
		res, unchecked := checkEnvironment(&o.cfg, "/sys/class/net")
		if err := printChecks(stderr, res, unchecked); err != nil {
			fmt.Fprintf(stderr, "ndpd: %v\n", err)
			return 1
		}
		return 0
	}
	if err := serve(&o.cfg, stderr); err != nil {
		fmt.Fprintf(stderr, "ndpd: %v\n", err)
		return 1
	}
	return 0
}

// runStatus prints a running daemon's status snapshot.
func runStatus(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ndpd status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("socket", "/run/ndpd/ndpd.sock", "control socket of the daemon")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	snap, err := daemon.QueryStatus(*path)
	if err != nil {
		fmt.Fprintf(stderr, "ndpd status: %v\n", err)
		return 1
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	enc.Encode(snap)
	return 0
}
