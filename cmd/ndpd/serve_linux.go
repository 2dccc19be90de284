package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/sys/unix"

	"github.com/ndpstack/ndpstack/afxdp"
	"github.com/ndpstack/ndpstack/internal/capture"
	"github.com/ndpstack/ndpstack/internal/daemon"
	"github.com/ndpstack/ndpstack/internal/engine"
	"github.com/ndpstack/ndpstack/internal/metrics"
	"github.com/ndpstack/ndpstack/ndp"
	"github.com/ndpstack/ndpstack/pullpacer"
	"github.com/ndpstack/ndpstack/ring"
)

func newLogger(c *Config, w io.Writer) (*zap.Logger, error) {
	var lvl zapcore.Level
	if err := lvl.Set(c.LogLevel); err != nil {
		return nil, err
	}
	ec := zap.NewProductionEncoderConfig()
	ec.EncodeTime = zapcore.ISO8601TimeEncoder
	var enc zapcore.Encoder
	if c.LogFormat == "console" {
		enc = zapcore.NewConsoleEncoder(ec)
	} else {
		enc = zapcore.NewJSONEncoder(ec)
	}
	return zap.New(zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(w)), lvl)), nil
}

// interfaceIPv4 returns the first IPv4 address of ifname.
func interfaceIPv4(ifname string) (netip.Addr, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return netip.Addr{}, err
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return netip.Addr{}, err
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap().Is4() {
				return ip.Unmap(), nil
			}
		}
	}
	return netip.Addr{}, fmt.Errorf("interface %s has no IPv4 address (set \"address\")", ifname)
}

func policy(s string) pullpacer.Policy {
	switch s {
	case "priority":
		return pullpacer.PolicyPriority
	case "deadline":
		return pullpacer.PolicyDeadline
	}
	return pullpacer.PolicyFair
}

func bindMode(s string) afxdp.BindMode {
	switch s {
	case "copy":
		return afxdp.BindCopy
	case "zerocopy":
		return afxdp.BindZeroCopy
	}
	return afxdp.BindAuto
}

func attachMode(s string) afxdp.AttachMode {
	switch s {
	case "native":
		return afxdp.AttachNative
	case "generic":
		return afxdp.AttachGeneric
	}
	return afxdp.AttachAuto
}

// serve runs the daemon until SIGTERM/SIGINT and a finished drain.
func serve(c *Config, logOut io.Writer) error {
	log, err := newLogger(c, logOut)
	if err != nil {
		return err
	}
	defer log.Sync()
	log.Info("ndpd starting", zap.String("version", versionString()), zap.String("interface", c.Interface),
		zap.Ints("queues", c.Queues), zap.String("control_socket", c.ControlSocket))

	addr := netip.Addr{}
	if c.Address != "" {
		addr = netip.MustParseAddr(c.Address)
	} else if addr, err = interfaceIPv4(c.Interface); err != nil {
		return err
	}
	var pcap *capture.Writer
	if c.PcapFile != "" {
		if pcap, err = capture.Create(c.PcapFile, capture.Config{MaxBytes: c.PcapMaxBytes, Name: c.Interface}); err != nil {
			return err
		}
		defer func() { // after the stack closed (deferred below, runs first)
			st := pcap.Stats()
			if err := pcap.Close(); err != nil {
				log.Warn("capture", zap.Error(err))
			}
			log.Info("capture closed", zap.String("file", c.PcapFile), zap.Uint64("frames", st.Frames),
				zap.Uint64("dropped", st.Dropped), zap.Uint64("truncated", st.Truncated))
		}()
	}
	// One engine stack per queue, each over its own AF_XDP socket and
	// UMEM; the capture, written by one stack at a time, records the first
	// queue's frames.
	sts, trs, err := daemon.OpenXDPStacks(engine.XDPConfig{
		Interface: c.Interface, UDPPort: c.NDPPort, MTU: c.MTU,
		Bind: bindMode(c.Bind), Attach: attachMode(c.Attach), Logger: log,
	}, c.Queues, engine.Config{
		Endpoint: ndp.Config{LocalIP: addr.As4(), UDPPort: c.NDPPort, MTU: c.MTU, IW: c.IW, UserTimeout: time.Duration(c.UserTimeout),
			Commodity: ndp.CommodityTrim{DataDSCP: c.DataDSCP, ControlDSCP: c.ControlDSCP, TrimDSCPs: c.TrimDSCPs}},
		LinkRate: int64(c.LinkRate),
		Gamma:    c.Gamma,
		Policy:   policy(c.Policy),
		Logger:   log,
		Capture:  pcap,
	}, daemon.EngineTransportConfig{DialTimeout: time.Duration(c.ResolveTimeout)})
	if err != nil {
		return fmt.Errorf("open %s queues %v: %w", c.Interface, c.Queues, err)
	}
	defer func() {
		for _, st := range sts {
			st.Close()
		}
	}()

	spin := time.Duration(c.Spin)
	if c.Poll == "busy" {
		spin = daemon.SpinForever
	}
	cores := make([]*daemon.Core, len(trs))
	for i, tr := range trs {
		cores[i], err = daemon.NewCore(daemon.Config{
			Pool:         ring.PoolConfig{Frames: c.Frames, FrameSize: c.FrameSize, AppFrames: c.AppFrames},
			Region:       ring.RegionConfig{Sockets: c.SocketsPerApp},
			SpinFor:      spin,
			DrainTimeout: time.Duration(c.DrainTimeout),
			LocalAddr:    addr,
			Queue:        c.Queues[i],
			Logger:       log,
		}, tr)
		if err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Dir(c.ControlSocket), 0o755); err != nil {
		return err
	}
	place, rss, err := dialPlacement(c.Interface, c.Queues)
	if err != nil {
		return err
	}
	srv, err := daemon.Listen(daemon.ServerConfig{
		Path: c.ControlSocket, Mode: c.socketMode(), Group: c.SocketGroup,
		AllowUIDs: c.AllowUIDs, AllowGIDs: c.AllowGIDs, Placement: place, RSS: rss, Logger: log,
	}, cores...)
	if err != nil {
		return err
	}

	if c.MetricsAddr != "" {
		ms, err := serveMetrics(c.MetricsAddr, cores, log)
		if err != nil {
			srv.Close()
			return err
		}
		defer ms.Close()
	}

	runErr := make(chan error, 1)
	go func() {
		runErr <- daemon.RunCores(cores, daemon.RunConfig{
			CPUs: c.coreCPUs(), StallTimeout: time.Duration(c.StallTimeout), Logger: log,
		})
	}()
	go srv.Serve()

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1)
	defer signal.Stop(sigs)
	log.Info("ndpd ready", zap.Ints("queues", c.Queues), zap.Stringer("dial_placement", place), zap.String("address", addr.String()), zap.Uint16("ndp_port", c.NDPPort),
		zap.Stringer("link_rate", c.LinkRate), zap.Float64("gamma", c.Gamma))
	for {
		select {
		case sig := <-sigs:
			if sig == syscall.SIGUSR1 {
				for i, core := range cores {
					if snap, err := core.Status(); err == nil {
						stats := sts[i].Stats()
						log.Info("status", zap.Int("queue", c.Queues[i]), zap.Any("daemon", snap), zap.Any("engine", stats))
					}
				}
				continue
			}
			log.Info("signal: draining", zap.Stringer("signal", sig))
			srv.StopAccepting()
			for _, core := range cores {
				if err := core.Drain(); err != nil {
					log.Warn("drain", zap.Int("queue", core.Queue()), zap.Error(err))
				}
			}
		case err := <-runErr:
			// On a queue's failure every core has been stopped; closing the
			// control connections tells every application (the stuck
			// queue's too) ErrDaemonGone.
			srv.Close()
			if err != nil {
				log.Error("ndpd stopping: a queue failed", zap.Error(err))
				return err
			}
			log.Info("ndpd stopped")
			return nil
		}
	}
}

// dialPlacement is how applications place dials on the queues: spread
// over them on veth (a frame arrives on the peer's RX queue of the number
// of the TX queue it left on, and the answers come back the same way); on
// a NIC with several queues, where its Toeplitz RSS, hashing UDP on
// addresses only, delivers the peer's frames. With several queues on a NIC
// whose RSS is not that, it fails: some connections would never work.
func dialPlacement(ifname string, queues []int) (daemon.Placement, *daemon.RSS, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, nil, err
	}
	defer unix.Close(fd)
	if info, err := unix.IoctlGetEthtoolDrvinfo(fd, ifname); err == nil && unix.ByteSliceToString(info.Driver[:]) == "veth" {
		return daemon.PlaceSpread, nil, nil
	}
	if len(queues) == 1 {
		return daemon.PlaceByPeer, nil, nil
	}
	rss, err := daemon.ReadRSS(ifname, queues)
	if err != nil {
		return 0, nil, fmt.Errorf("queues %v: several queues need the NIC's RSS to keep a connection on one queue: %w", queues, err)
	}
	return daemon.PlaceRSS, &rss, nil
}

// serveMetrics serves /metrics on addr: each queue's daemon collector
// (stack, pool, core loop, applications; one core status request per
// scrape), its series labelled queue="N", plus the Go runtime's and the
// process's. The listener is bound before it returns, so a bad address
// fails the start.
func serveMetrics(addr string, cores []*daemon.Core, log *zap.Logger) (*http.Server, error) {
	reg := prometheus.NewRegistry()
	for _, core := range cores {
		prometheus.WrapRegistererWith(prometheus.Labels{"queue": strconv.Itoa(core.Queue())}, reg).
			MustRegister(metrics.NewDaemonCollector(core.Metrics))
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics_addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: zap.NewStdLog(log), Timeout: 10 * time.Second}))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 15 * time.Second}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("metrics server", zap.Error(err))
		}
	}()
	log.Info("metrics", zap.String("addr", ln.Addr().String()))
	return hs, nil
}
