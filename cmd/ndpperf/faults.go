package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ndpstack/ndpstack/internal/testbed"
	"github.com/ndpstack/ndpstack/sockapi"
)

// faults: a matrix of fault scenarios on a two-namespace veth testbed, NDP
// (embedded stacks) and kernel TCP side by side, one row per scenario and
// transport: outcome, bytes verified, time to recover, the error each end saw.
//
// The matrix is a table of faultScenario values. Each scenario runs on a
// fresh pair of NDP stacks (or kernel sockets) over the shared testbed and
// fills a faultRow. Scenarios are added with registerFaultScenarios from any
// file of this package (the link outages are below; message-server scenarios
// register their own rows the same way), so the matrix grows without a
// change here.
//
// Link outages: the client sends size bytes (pseudo-random, SHA-256
// verified at the server) over one connection; once the server has read a
// quarter, the client's veth is set down for the outage and up again. Time
// to resume is from link up (and from link down) to the first bytes the
// server reads after the link came back. Past the user timeout: the link
// stays down beyond the user timeout (the same one for NDP's
// sockapi.Config.UserTimeout and kernel TCP's TCP_USER_TIMEOUT); each end
// reports the error it got and how long after the link went down.

func init() {
	register(&subcommand{
		name:    "faults",
		summary: "fault matrix on a veth testbed (link outages, user timeout, ...): NDP vs kernel TCP, one row per scenario (root)",
		run:     runFaults,
	})
	registerFaultScenarios(outageScenarios)
}

// faultOpts are the matrix's flags, shared by every scenario.
type faultOpts struct {
	size        int64
	outages     []time.Duration
	userTimeout time.Duration
	only        *regexp.Regexp
	transports  []string
	json        bool
}

// faultScenario is one row kind of the matrix: it runs once per transport it
// names.
type faultScenario struct {
	name       string   // row label; --only matches it
	what       string   // one line: the fault and what is expected
	transports []string // "ndp", "tcp"
	run        func(env *faultEnv, transport string) faultRow
}

var faultScenarioSources []func(o faultOpts) []faultScenario

// registerFaultScenarios adds a source of scenarios to the matrix; called
// from init functions in this package. Sources run in registration order.
func registerFaultScenarios(src func(o faultOpts) []faultScenario) {
	faultScenarioSources = append(faultScenarioSources, src)
}

// faultRow is one scenario's result on one transport. Fields that do not
// apply to a scenario stay zero and are left out of the JSON.
type faultRow struct {
	Scenario  string `json:"scenario"`
	Transport string `json:"transport"`
	// Pass says whether the row meets the scenario's expectation (Expect).
	Pass    bool   `json:"pass"`
	Expect  string `json:"expect"`
	Outcome string `json:"outcome"`
	// Requests made and lost (not completed and verified).
	Requests int     `json:"requests"`
	Lost     int     `json:"lost"`
	Bytes    int64   `json:"bytes,omitempty"`
	Verified bool    `json:"sha256_verified"`
	OutageS  float64 `json:"outage_s,omitempty"`
	// ResumeAfterUpS: from link up to the first new bytes the receiver read;
	// ResumeAfterDownS: the same from link down.
	ResumeAfterUpS   float64 `json:"resume_after_up_s,omitempty"`
	ResumeAfterDownS float64 `json:"resume_after_down_s,omitempty"`
	TotalS           float64 `json:"total_s,omitempty"`
	// ClientErr and ServerErr are the errors each end saw ("" = none), and
	// how long after the fault began (link down).
	ClientErr       string  `json:"client_error,omitempty"`
	ServerErr       string  `json:"server_error,omitempty"`
	ClientErrAfterS float64 `json:"client_error_after_s,omitempty"`
	ServerErrAfterS float64 `json:"server_error_after_s,omitempty"`
	BoundS          float64 `json:"bound_s,omitempty"`
	// Metrics holds a scenario's own figures (e.g. latency percentiles).
	Metrics map[string]float64 `json:"metrics,omitempty"`
	Detail  string             `json:"detail,omitempty"`
}

type faultOutput struct {
	Size         int64      `json:"size_bytes"`
	UserTimeoutS float64    `json:"user_timeout_s"`
	Rows         []faultRow `json:"rows"`
	// ResumeNDPOverTCP: per outage scenario, NDP's time to resume after
	// link up over kernel TCP's (and from link down).
	ResumeNDPOverTCP     map[string]float64 `json:"resume_after_up_ndp_over_tcp,omitempty"`
	ResumeDownNDPOverTCP map[string]float64 `json:"resume_after_down_ndp_over_tcp,omitempty"`
	AllPass              bool               `json:"all_pass"`
	CPUs                 int                `json:"cpus"`
	Setup                string             `json:"setup"`
}

func parseFaultFlags(args []string) (faultOpts, error) {
	fs := flag.NewFlagSet("faults", flag.ContinueOnError)
	size := byteSize(64 << 20)
	fs.Var(&size, "size", "bytes per transfer (e.g. 64MiB)")
	outages := fs.String("outages", "300ms,2s,3s", "link outages to run during a transfer, comma-separated")
	ut := fs.Duration("user-timeout", 2*time.Second, "user timeout of both transports in the past-the-user-timeout scenario (NDP UserTimeout, TCP_USER_TIMEOUT)")
	only := fs.String("only", "", "run only scenarios whose name matches this regexp")
	transports := fs.String("transports", "ndp,tcp", "transports to run, comma-separated (ndp, tcp)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return faultOpts{}, err
	}
	if fs.NArg() > 0 {
		return faultOpts{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o := faultOpts{size: int64(size), userTimeout: *ut, json: *asJSON}
	for _, s := range strings.Split(*outages, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 || d > time.Minute {
			return o, fmt.Errorf("--outages: %q: want durations in (0, 1m]", s)
		}
		o.outages = append(o.outages, d)
	}
	re, err := regexp.Compile(*only)
	if err != nil {
		return o, fmt.Errorf("--only: %w", err)
	}
	o.only = re
	for _, t := range strings.Split(*transports, ",") {
		switch t = strings.TrimSpace(t); t {
		case "ndp", "tcp":
			o.transports = append(o.transports, t)
		default:
			return o, fmt.Errorf("--transports: %q: want ndp or tcp", t)
		}
	}
	switch {
	case o.size < 1<<20 || o.size > 1<<30:
		return o, fmt.Errorf("--size %d: want 1MiB..1GiB", o.size)
	case o.userTimeout < 100*time.Millisecond || o.userTimeout > time.Minute:
		return o, fmt.Errorf("--user-timeout %v: want 100ms..1m", o.userTimeout)
	}
	return o, nil
}

func runFaults(args []string) error {
	o, err := parseFaultFlags(args)
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("needs root: the matrix runs on network namespaces, veth pairs and AF_XDP")
	}
	fmt.Fprintln(os.Stderr, "ndpperf faults: building a two-namespace veth testbed...")
	out, err := faultsTestbed(o)
	if err != nil {
		return err
	}
	if o.json {
		return printJSON(out)
	}
	printFaults(out)
	return nil
}

// faultEnv is what a scenario runs on: the testbed pair (A is the client,
// B the server), the options and the payload.
type faultEnv struct {
	o       faultOpts
	pair    *testbed.Pair
	payload []byte
	sum     [32]byte
}

func faultsTestbed(o faultOpts) (faultOutput, error) {
	out := faultOutput{Size: o.size, UserTimeoutS: o.userTimeout.Seconds(), CPUs: runtime.NumCPU(),
		ResumeNDPOverTCP: map[string]float64{}, ResumeDownNDPOverTCP: map[string]float64{}}
	out.Setup = "two namespaces joined by one veth pair (MTU 1500); NDP embedded stacks opened fresh per row, kernel TCP on the same pair without XDP; the client's veth is set down for an outage"
	payload, sum := throughputPayload(o.size)
	tb, err := newTestbed()
	if err != nil {
		return out, err
	}
	defer tb.Close()
	pair, err := tb.NewPair(testbed.VethConfig{AddrA: "10.205.0.1/24", AddrB: "10.205.0.2/24"})
	if err != nil {
		return out, err
	}
	env := &faultEnv{o: o, pair: pair, payload: payload, sum: sum}
	out.AllPass = true
	for _, src := range faultScenarioSources {
		for _, sc := range src(o) {
			if !o.only.MatchString(sc.name) {
				continue
			}
			for _, t := range sc.transports {
				if !contains(o.transports, t) {
					continue
				}
				fmt.Fprintf(os.Stderr, "ndpperf faults: %s over %s...\n", sc.name, t)
				r := sc.run(env, t)
				r.Scenario, r.Transport = sc.name, t
				if r.Expect == "" {
					r.Expect = sc.what
				}
				out.Rows = append(out.Rows, r)
				out.AllPass = out.AllPass && (r.Pass || t != "ndp")
				// a scenario must leave the link up for the next
				if err := env.setLink(true); err != nil {
					return out, err
				}
			}
		}
	}
	for _, n := range out.Rows {
		if n.Transport != "ndp" || n.ResumeAfterUpS == 0 {
			continue
		}
		for _, t := range out.Rows {
			if t.Scenario == n.Scenario && t.Transport == "tcp" && t.ResumeAfterUpS > 0 {
				out.ResumeNDPOverTCP[n.Scenario] = n.ResumeAfterUpS / t.ResumeAfterUpS
				out.ResumeDownNDPOverTCP[n.Scenario] = n.ResumeAfterDownS / t.ResumeAfterDownS
			}
		}
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func printFaults(out faultOutput) {
	fmt.Printf("Fault matrix (%s)\n", out.Setup)
	fmt.Printf("%-22s %-4s %-5s %-4s %-8s %9s %9s %8s  %-s\n", "scenario", "tr", "pass", "lost", "verified", "resume_up", "resume_dn", "total_s", "errors (client | server)")
	for _, r := range out.Rows {
		errs := ""
		if r.ClientErr != "" || r.ServerErr != "" {
			errs = fmt.Sprintf("%s @%.2fs | %s @%.2fs", orNone(r.ClientErr), r.ClientErrAfterS, orNone(r.ServerErr), r.ServerErrAfterS)
		}
		fmt.Printf("%-22s %-4s %-5v %4d %-8v %9.3f %9.3f %8.3f  %s\n", r.Scenario, r.Transport, r.Pass, r.Lost, r.Verified,
			r.ResumeAfterUpS, r.ResumeAfterDownS, r.TotalS, errs)
		if r.Detail != "" {
			fmt.Printf("%-22s      %s\n", "", r.Detail)
		}
	}
	for sc, v := range out.ResumeNDPOverTCP {
		fmt.Printf("%s: ndp/tcp time to resume after link up %.2f, after link down %.2f\n", sc, v, out.ResumeDownNDPOverTCP[sc])
	}
	fmt.Printf("all ndp rows pass: %v\n", out.AllPass)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// setLink sets the client's veth up or down.
func (e *faultEnv) setLink(up bool) error {
	state := "down"
	if up {
		state = "up"
	}
	if _, err := e.pair.A.Run("link", "set", "dev", e.pair.Veth.A.Name, state); err != nil {
		return fmt.Errorf("link %s: %w", state, err)
	}
	return nil
}

// openNDP opens a client stack on A and a server stack on B.
func (e *faultEnv) openNDP(cfg sockapi.Config) (client, server *sockapi.Stack, err error) {
	if client, err = openStack(e.pair.A, e.pair.Veth.A.Name, cfg); err != nil {
		return nil, nil, err
	}
	if server, err = openStack(e.pair.B, e.pair.Veth.B.Name, cfg); err != nil {
		client.Close()
		return nil, nil, err
	}
	return client, server, nil
}

// faultConn is what a transfer needs of either transport's connection.
type faultConn interface {
	io.ReadWriteCloser
	SetDeadline(time.Time) error
	CloseWrite() error
}

// dialPair connects a client on A to a server on B over transport t and
// returns both ends; cleanup closes everything (NDP stacks included).
// userTimeout, if non-zero, is the connection's user timeout (NDP stacks'
// UserTimeout, TCP_USER_TIMEOUT on both sockets).
func (e *faultEnv) dialPair(t string, userTimeout time.Duration) (client, server faultConn, cleanup func(), err error) {
	var closers []io.Closer
	cleanup = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i].Close()
		}
	}
	defer func() {
		if err != nil {
			cleanup()
		}
	}()
	switch t {
	case "ndp":
		cs, ss, err := e.openNDP(sockapi.Config{UserTimeout: userTimeout})
		if err != nil {
			return nil, nil, cleanup, err
		}
		closers = append(closers, ss, cs)
		l, err := ss.Listen(9)
		if err != nil {
			return nil, nil, cleanup, err
		}
		closers = append(closers, l)
		l.SetDeadline(time.Now().Add(10 * time.Second))
		// zero-RTT: the server learns of the connection from its first data
		c, err := cs.Dial(context.Background(), e.pair.Veth.B.Addr.Addr().String()+":9", sockapi.WithDialTimeout(5*time.Second))
		if err != nil {
			return nil, nil, cleanup, err
		}
		closers = append(closers, c)
		if _, err := c.Write([]byte{0}); err != nil {
			return nil, nil, cleanup, err
		}
		s, err := l.AcceptNDP()
		if err != nil {
			return nil, nil, cleanup, err
		}
		closers = append(closers, s)
		var b [1]byte
		if _, err := io.ReadFull(s, b[:]); err != nil {
			return nil, nil, cleanup, err
		}
		return c, s, cleanup, nil
	case "tcp":
		addr := e.pair.Veth.B.Addr.Addr().String() + ":9913"
		var ln net.Listener
		if err := e.pair.B.Do(func() (err error) {
			lc := net.ListenConfig{Control: tcpUserTimeoutControl(userTimeout)}
			ln, err = lc.Listen(context.Background(), "tcp4", addr)
			return err
		}); err != nil {
			return nil, nil, cleanup, err
		}
		closers = append(closers, ln)
		var c net.Conn
		if err := e.pair.A.Do(func() (err error) {
			d := net.Dialer{Timeout: 5 * time.Second, Control: tcpUserTimeoutControl(userTimeout)}
			c, err = d.Dial("tcp4", addr)
			return err
		}); err != nil {
			return nil, nil, cleanup, err
		}
		closers = append(closers, c)
		s, err := ln.Accept()
		if err != nil {
			return nil, nil, cleanup, err
		}
		closers = append(closers, s)
		return c.(*net.TCPConn), s.(*net.TCPConn), cleanup, nil
	}
	return nil, nil, cleanup, fmt.Errorf("unknown transport %q", t)
}

// tcpUserTimeoutControl sets TCP_USER_TIMEOUT (inherited by accepted
// sockets from the listener) when d is non-zero.
func tcpUserTimeoutControl(d time.Duration) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, c syscall.RawConn) error {
		if d == 0 {
			return nil
		}
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeoutOpt, int(d/time.Millisecond))
		})
		return errors.Join(err, serr)
	}
}

// tcpUserTimeoutOpt is TCP_USER_TIMEOUT (linux/tcp.h).
const tcpUserTimeoutOpt = 18

// transferLog is what the receiving end of a transfer saw.
type transferLog struct {
	n     atomic.Int64
	reads []readMark // each read's end time and bytes so far (receiver goroutine only)
	sum   [32]byte
	end   time.Time
	err   error
	errAt time.Time
}

// awaitBytes returns once the receiver has n bytes or done is closed (the
// receiver ended), polling every 100 µs.
func (l *transferLog) awaitBytes(n int64, done <-chan struct{}) {
	for l.n.Load() < n {
		select {
		case <-done:
			return
		case <-time.After(100 * time.Microsecond):
		}
	}
}

type readMark struct {
	at time.Time
	n  int64
}

// receive reads r to EOF, hashing and timing every read.
func (l *transferLog) receive(r io.Reader) {
	h := sha256.New()
	buf := make([]byte, 256<<10)
	l.reads = make([]readMark, 0, 4096)
	for {
		m, err := r.Read(buf)
		if m > 0 {
			h.Write(buf[:m])
			l.reads = append(l.reads, readMark{time.Now(), l.n.Add(int64(m))})
		}
		if err == io.EOF {
			l.end = time.Now()
			copy(l.sum[:], h.Sum(nil))
			return
		}
		if err != nil {
			l.err, l.errAt = err, time.Now()
			return
		}
	}
}

// firstReadAfter returns the end of the first read after t.
func (l *transferLog) firstReadAfter(t time.Time) (time.Time, bool) {
	for _, m := range l.reads {
		if m.at.After(t) {
			return m.at, true
		}
	}
	return time.Time{}, false
}

// outageScenarios are the link outages during a transfer, then the outage
// past the user timeout.
func outageScenarios(o faultOpts) []faultScenario {
	var s []faultScenario
	for _, d := range o.outages {
		s = append(s, faultScenario{
			name:       "outage " + d.String(),
			what:       fmt.Sprintf("link down %v during a %d MiB transfer: completes, SHA-256 verified", d, o.size>>20),
			transports: []string{"ndp", "tcp"},
			run:        func(env *faultEnv, t string) faultRow { return env.outageTransfer(t, d) },
		})
	}
	s = append(s, faultScenario{
		name:       "past user timeout",
		what:       fmt.Sprintf("link down past the user timeout (%v) during a transfer: both ends get an error within the bound, no read blocks past it", o.userTimeout),
		transports: []string{"ndp", "tcp"},
		run:        func(env *faultEnv, t string) faultRow { return env.pastUserTimeout(t) },
	})
	return s
}

// outageTransfer sends the payload from client to server with the link down
// for d once the server has read a quarter of it.
func (e *faultEnv) outageTransfer(t string, d time.Duration) faultRow {
	row := faultRow{Requests: 1, Lost: 1, OutageS: d.Seconds()}
	client, server, cleanup, err := e.dialPair(t, 0)
	if err != nil {
		row.Outcome = "setup: " + err.Error()
		return row
	}
	defer cleanup()
	// generous: only a connection that never resumes trips it
	deadline := time.Now().Add(d + 60*time.Second)
	client.SetDeadline(deadline)
	server.SetDeadline(deadline)
	var log transferLog
	done := make(chan struct{})
	go func() {
		defer close(done)
		log.receive(server)
		server.CloseWrite()
	}()
	start := time.Now()
	sendErr := make(chan error, 1)
	go func() {
		_, err := client.Write(e.payload)
		if err == nil {
			err = client.CloseWrite()
		}
		if err == nil {
			_, err = io.Copy(io.Discard, client) // the server's close
		}
		sendErr <- err
	}()
	// the outage, once a quarter has arrived
	var down, up time.Time
	log.awaitBytes(e.o.size/4, done)
	if log.n.Load() < e.o.size {
		down = time.Now()
		if err := e.setLink(false); err != nil {
			row.Outcome = err.Error()
			return row
		}
		time.Sleep(d)
		up = time.Now()
		if err := e.setLink(true); err != nil {
			row.Outcome = err.Error()
			return row
		}
	}
	<-done
	cerr := <-sendErr
	if log.err != nil {
		row.ServerErr = log.err.Error()
		row.ServerErrAfterS = log.errAt.Sub(down).Seconds()
	}
	if cerr != nil {
		row.ClientErr = cerr.Error()
	}
	row.Bytes = log.n.Load()
	row.Verified = log.err == nil && row.Bytes == e.o.size && bytes.Equal(log.sum[:], e.sum[:])
	if down.IsZero() {
		row.Outcome = "the transfer ended before the outage began: use a larger --size"
		return row
	}
	if at, ok := log.firstReadAfter(up); ok {
		row.ResumeAfterUpS = at.Sub(up).Seconds()
		row.ResumeAfterDownS = at.Sub(down).Seconds()
	}
	if row.Verified {
		row.Lost = 0
		row.TotalS = log.end.Sub(start).Seconds()
	}
	row.Pass = row.Verified && cerr == nil
	switch {
	case row.Pass:
		row.Outcome = "completed"
	case !row.Verified:
		row.Outcome = fmt.Sprintf("not completed: %d of %d bytes", row.Bytes, e.o.size)
	default:
		row.Outcome = "completed, client error"
	}
	return row
}

// userTimeoutBound is how long after the link went down each end must have
// its error in the past-the-user-timeout scenario: the user timeout counts
// from the last frame heard from the peer (at most the link-down time), plus
// the time a timer and a waiting reader take to run on a loaded host.
func userTimeoutBound(ut time.Duration) time.Duration { return ut + 500*time.Millisecond }

// pastUserTimeout runs a transfer and takes the link down for good (until
// both ends reported an error or the bound plus a second passed), once a
// quarter has arrived and before the sender has written the second half.
func (e *faultEnv) pastUserTimeout(t string) faultRow {
	ut := e.o.userTimeout
	bound := userTimeoutBound(ut)
	row := faultRow{Requests: 1, Lost: 1, BoundS: bound.Seconds()}
	client, server, cleanup, err := e.dialPair(t, ut)
	if err != nil {
		row.Outcome = "setup: " + err.Error()
		return row
	}
	defer cleanup()
	var log transferLog
	done := make(chan struct{})
	go func() {
		defer close(done)
		log.receive(server)
	}()
	type result struct {
		err error
		at  time.Time
	}
	// The second half is written only once the link is down, so the
	// transfer cannot finish before the outage however fast the link is.
	sendRes := make(chan result, 1)
	linkDown := make(chan struct{})
	go func() {
		half := len(e.payload) / 2
		_, err := client.Write(e.payload[:half])
		if err == nil {
			<-linkDown
			_, err = client.Write(e.payload[half:])
		}
		if err == nil {
			err = client.CloseWrite()
		}
		sendRes <- result{err, time.Now()}
	}()
	log.awaitBytes(e.o.size/4, done)
	down := time.Now()
	err = e.setLink(false)
	close(linkDown)
	if err != nil {
		row.Outcome = err.Error()
		return row
	}
	// A read or write still blocked past the bound is cut off by its
	// deadline a second later (and reported as blocked).
	limit := down.Add(bound + time.Second)
	client.SetDeadline(limit)
	server.SetDeadline(limit)
	<-done
	cres := <-sendRes
	if err := e.setLink(true); err != nil {
		row.Outcome = err.Error()
		return row
	}
	row.Bytes = log.n.Load()
	within := func(err error, at time.Time) (string, float64, bool) {
		if err == nil {
			return "", at.Sub(down).Seconds(), false
		}
		after := at.Sub(down)
		msg := err.Error()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			msg = "blocked past the bound (own deadline): " + msg
			return msg, after.Seconds(), false
		}
		return msg, after.Seconds(), after <= bound
	}
	var cok, sok bool
	row.ClientErr, row.ClientErrAfterS, cok = within(cres.err, cres.at)
	row.ServerErr, row.ServerErrAfterS, sok = within(log.err, log.errAt)
	if log.err == nil {
		row.ServerErr = "none: read to EOF"
	}
	if cres.err == nil {
		row.ClientErr = "none: write completed"
	}
	row.Pass = cok && sok
	if row.Pass {
		row.Outcome = "both ends errored within the bound"
	} else {
		row.Outcome = "an end did not error within the bound"
	}
	return row
}
