package softswitch

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ndpstack/ndpstack/afxdp"
	"github.com/ndpstack/ndpstack/ndp"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// Switch joins veth ports through AF_XDP sockets (one per port, copy mode on
// veth) and runs core on one locked OS thread (Run).
type Switch struct {
	cfg   Config
	ports []*afxdp.Port
	core  *core
	start time.Time
	cpu0  float64 // minus the thread's CPU seconds when Run started
	log   *zap.Logger

	stop    atomic.Bool
	runMu   sync.Mutex // orders Run's running.Add before Close's Wait
	running sync.WaitGroup

	mu  sync.Mutex // guards pub
	pub Stats

	closeOnce sync.Once
	closeErr  error
}

// The largest frame a 2048-byte AF_XDP chunk holds (the chunk less XDP's
// 256-byte headroom); larger ones get 4096-byte chunks.
const maxFrame = bufSize - 256

// vethNativeMaxMTU is the largest MTU at which veth runs a native XDP
// program without multi-buffer support, as the switch's ports do (native
// mode: see Open): a page (4 KiB) less XDP's 256-byte headroom, the skb's
// shared info (320 bytes on x86-64) and the Ethernet header. Above it the
// kernel refuses the attach with ERANGE.
const vethNativeMaxMTU = 3506

// Batch sizes of one receive and one transmit call.
const (
	rxBatch = 64
	txBatch = 64
	// maxSleep bounds one ppoll: how long Close may wait for Run to notice.
	maxSleep = 20 * time.Millisecond
	// pubEvery is how often a busy loop publishes its counters for Stats.
	pubEvery = ndp.Time(time.Millisecond)
)

// Open opens an AF_XDP socket on every port with a program that steers every
// frame to it, and returns the switch, not yet running. It must run on a thread
// inside the ports' network namespace (testbed.Namespace.Do).
func Open(cfg Config) (*Switch, error) {
	cfg.Ports = append([]string(nil), cfg.Ports...)
	cfg.populate()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	frameSize := bufSize
	for _, name := range cfg.Ports {
		ifc, err := net.InterfaceByName(name)
		if err != nil {
			return nil, fmt.Errorf("softswitch: port %s: %w", name, err)
		}
		switch {
		case ifc.MTU > vethNativeMaxMTU:
			return nil, fmt.Errorf("%w: port %s: MTU %d, at most %d (veth runs native XDP, which the switch attaches, only up to that without multi-buffer)", ErrConfig, name, ifc.MTU, vethNativeMaxMTU)
		case ifc.MTU+14 > maxFrame:
			frameSize, cfg.jumbo = jumboBufSize, true
		}
	}
	c, err := newCore(cfg)
	if err != nil {
		return nil, err
	}
	s := &Switch{cfg: cfg, core: c, log: cfg.Logger}
	for _, name := range cfg.Ports {
		p, err := afxdp.Open(afxdp.Config{
			Interface: name, SteerAll: true, NumFrames: 2048, RingSize: 512, FrameSize: frameSize,
			// Native XDP on the switch's veth end turns GSO off on the host's end
			// (veth_fix_features): the host's kernel TCP then sends MTU-sized
			// frames the switch can queue, as it would toward a real switch.
			Attach: afxdp.AttachNative, Logger: cfg.Logger,
		})
		if err != nil {
			s.closePorts()
			return nil, fmt.Errorf("softswitch: port %s: %w", name, err)
		}
		s.ports = append(s.ports, p)
	}
	s.core.stats(&s.pub)
	return s, nil
}

// Run switches frames until Close. It locks its goroutine to an OS thread.
func (s *Switch) Run() error {
	s.runMu.Lock()
	if s.stop.Load() {
		s.runMu.Unlock()
		return afxdp.ErrClosed
	}
	s.running.Add(1)
	s.runMu.Unlock()
	defer s.running.Done()
	runtime.LockOSThread()
	if s.realtime() {
		// The thread must not go back to the runtime's pool under SCHED_FIFO:
		// where the normal policy cannot be restored it stays locked and
		// exits with the goroutine.
		defer func() {
			if unix.SchedSetAttr(0, &unix.SchedAttr{Policy: unix.SCHED_NORMAL}, 0) == nil {
				runtime.UnlockOSThread()
			}
		}()
	} else {
		defer runtime.UnlockOSThread()
	}
	addProc()
	defer releaseProc()
	// Wakeups at emulated departure times want microseconds, not the default
	// 50 µs timer slack.
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1000, 0, 0, 0)
	s.start = time.Now()
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_THREAD, &ru) == nil { // the thread may have run other goroutines before
		s.cpu0 = -float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
	}
	var (
		rx       = make([]afxdp.Desc, rxBatch)
		tx       = make([]afxdp.Desc, txBatch)
		out      = make([][]byte, 0, 4*txBatch)
		fds      = make([]unix.PollFd, len(s.ports))
		lastBusy ndp.Time
		lastPub  ndp.Time
		spin     = ndp.Time(s.cfg.Spin)
		tick     = ndp.Time(s.cfg.Tick)
		tickTS   = unix.NsecToTimespec(int64(s.cfg.Tick))
	)
	for !s.stop.Load() {
		now := s.now()
		// Departures due by now go first: after a stall (the thread was not
		// scheduled) the frames that arrived meanwhile must not find queues
		// the emulated links would already have drained.
		busy := s.departAll(tx, &out, now)
		for i, p := range s.ports {
			if s.core.ports[i].down {
				continue
			}
			q, u := p.Queues()[0], p.UMEM()
			n := q.Receive(rx)
			if n == 0 {
				continue
			}
			busy = true
			for _, d := range rx[:n] {
				s.core.ingress(i, u.Bytes(d), now)
			}
			_, _ = u.Release(rx[:n]) // frames from Receive: cannot be refused
		}
		if s.departAll(tx, &out, now) {
			busy = true
		}
		if busy {
			s.core.st.BusyPasses++
			lastBusy = now
			if now-lastPub > pubEvery {
				s.publish()
				lastPub = now
			}
			if tick > 0 {
				s.core.st.Ticks++
				_ = unix.Nanosleep(&tickTS, nil)
			}
			continue
		}
		if spin > 0 && now-lastBusy < spin {
			continue
		}
		s.publish()
		lastPub = now
		s.sleep(fds, now)
	}
	s.publish()
	return nil
}

// realtime puts Run's locked thread under SCHED_FIFO at Config.Priority and
// reports whether it did.
func (s *Switch) realtime() bool {
	if s.cfg.Priority < 0 {
		return false
	}
	err := unix.SchedSetAttr(0, &unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: uint32(s.cfg.Priority)}, 0)
	if err != nil {
		s.log.Warn("softswitch: cannot run the loop under SCHED_FIFO; it runs under the normal policy", zap.Int("priority", s.cfg.Priority), zap.Error(err))
		return false
	}
	return true
}

// procs guards the GOMAXPROCS adjustment of running switches.
var procs sync.Mutex

// addProc raises GOMAXPROCS by one for a Run loop, and releaseProc lowers it
// again when the loop ends. The loop's thread holds a P of the Go runtime
// whenever it runs Go code and also while it sleeps in ppoll(2) or kicks a
// transmit: the runtime takes a P back from a thread in a system call only
// when sysmon notices, and sysmon's period grows to 10 ms. In a process that
// also runs the stacks of a testbed (ndpperf), a switch on one P of two left
// the stacks one, and goroutines with frames to handle waited milliseconds
// for it (docs/datapath.md, "the incast through ndpswitch"). With the extra P
// the switch's thread takes CPU from the rest only as an OS thread does,
// as a switch process of its own would.
func addProc() {
	procs.Lock()
	defer procs.Unlock()
	runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 1)
}

func releaseProc() {
	procs.Lock()
	defer procs.Unlock()
	runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0)-1, 1))
}

// departAll carries frames across the internal leaf-spine links, transmits
// every port's frames due by now+Horizon and reports whether there were any.
func (s *Switch) departAll(tx []afxdp.Desc, out *[][]byte, now ndp.Time) bool {
	busy := s.core.carry(now)
	for i := range s.ports {
		if s.core.ports[i].down {
			continue
		}
		if t, ok := s.core.due(i); !ok || t > now+ndp.Time(s.cfg.Horizon) {
			continue
		}
		*out = s.core.depart(i, now, (*out)[:0])
		if len(*out) > 0 {
			busy = true
			s.transmit(i, *out, tx, now)
		}
	}
	return busy
}

// transmit copies the departing frames into port i's UMEM frames and puts them
// on its TX ring; what the veth refuses is counted and dropped (the emulated
// link already sent it). Every queue buffer goes back to the pool.
func (s *Switch) transmit(i int, out [][]byte, tx []afxdp.Desc, now ndp.Time) {
	p, o := s.ports[i], s.core.ports[i]
	q, u := p.Queues()[0], p.UMEM()
	for len(out) > 0 {
		m := min(len(out), len(tx))
		k := u.Alloc(tx[:m])
		for j := 0; j < k; j++ {
			tx[j].Len = uint32(copy(u.Buffer(tx[j]), out[j]))
			o.st.TxBytes += uint64(tx[j].Len)
		}
		sent, err := q.Transmit(tx[:k])
		s.core.st.TxKicks++
		if sent < k {
			_, _ = u.Release(tx[sent:k])
		}
		o.st.TxFrames += uint64(sent)
		o.st.TxDropped += uint64(m - sent)
		for _, f := range out[:m] {
			s.core.put(f)
		}
		out = out[m:]
		if err != nil {
			s.log.Warn("softswitch: port transmit failed; taking it out of service", zap.String("port", o.name), zap.Error(err))
			s.core.setDown(i, now)
			for _, f := range out {
				s.core.put(f)
			}
			return
		}
	}
}

// sleep waits in ppoll(2) for a frame on any port, until the earliest queued
// departure is due (less the horizon) or maxSleep. A port whose socket reports an
// error (its interface was removed) is taken out of service.
func (s *Switch) sleep(fds []unix.PollFd, now ndp.Time) {
	wait := ndp.Time(maxSleep)
	for i := range s.core.ports {
		if t, ok := s.core.due(i); ok {
			wait = min(wait, t-s.cfg.horizonTime()-now)
		}
	}
	if wait <= 0 {
		return
	}
	fds = fds[:0]
	for i, p := range s.ports {
		if !s.core.ports[i].down {
			fds = append(fds, unix.PollFd{Fd: int32(p.Queues()[0].FD()), Events: unix.POLLIN})
		}
	}
	ts := unix.NsecToTimespec(int64(wait))
	s.core.st.Sleeps++
	n, err := unix.Ppoll(fds, &ts, nil)
	if err != nil || n == 0 {
		return
	}
	for _, fd := range fds {
		if fd.Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) == 0 {
			continue
		}
		for i, p := range s.ports {
			if int32(p.Queues()[0].FD()) == fd.Fd {
				s.log.Warn("softswitch: port socket error; taking it out of service", zap.String("port", s.cfg.Ports[i]))
				s.core.setDown(i, now)
			}
		}
	}
}

func (c *Config) horizonTime() ndp.Time { return ndp.Time(c.Horizon) }

func (s *Switch) now() ndp.Time { return ndp.Time(time.Since(s.start)) }

// publish copies the counters for Stats; called from Run's thread.
func (s *Switch) publish() {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_THREAD, &ru) == nil {
		s.core.st.CPUSeconds = s.cpu0 + float64(ru.Utime.Nano()+ru.Stime.Nano())/1e9
	}
	s.mu.Lock()
	s.core.stats(&s.pub)
	s.mu.Unlock()
}

// Stats returns the counters as of Run's last publication: at most about a
// millisecond old while frames flow, current once the switch is idle.
func (s *Switch) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.pub
	st.Ports = append([]PortStats(nil), s.pub.Ports...)
	return st
}

// Config returns the configuration with defaults filled in.
func (s *Switch) Config() Config { return s.cfg }

// Close stops Run (within maxSleep), then closes every port's socket and
// program. Idempotent.
func (s *Switch) Close() error {
	s.closeOnce.Do(func() {
		s.runMu.Lock()
		s.stop.Store(true)
		s.runMu.Unlock()
		s.running.Wait()
		s.closeErr = s.closePorts()
	})
	return s.closeErr
}

func (s *Switch) closePorts() error {
	var errs []error
	for _, p := range s.ports {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}
