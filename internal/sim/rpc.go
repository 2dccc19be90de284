package sim

import (
	"errors"
	"fmt"
	"io"

	"github.com/ndpstack/ndpstack/ndp"
)

// RPCConfig is a closed-loop request/response workload between host 0
// (client) and host 1 (server) of a star: every RPC opens a new NDP
// connection, sends Size bytes and its FIN in the first RTT, and the server
// answers with Size bytes and closes. The next RPC starts when the response
// was read to EOF.
type RPCConfig struct {
	Star StarConfig // Hosts is forced to at least 2
	Size int        // request and response bytes
	N    int        // RPCs
}

// RPCResult holds each RPC's latency (virtual time, dial to EOF of the response).
type RPCResult struct {
	Latencies []ndp.Time
}

type rpcApp struct {
	st      *Star
	cfg     RPCConfig
	req     []byte
	buf     []byte
	started ndp.Time
	cur     ndp.Handle
	got     int
	res     RPCResult
	err     error
	srv     map[ndp.Handle]int // server: bytes read per connection
}

// RunRPC runs the workload and returns the latencies. The client host runs
// the client side of every RPC, the server host the server side; both are
// the real ndp endpoints and pull queues of the simulator's hosts.
func RunRPC(cfg RPCConfig) (RPCResult, error) {
	if cfg.Size <= 0 || cfg.N <= 0 {
		return RPCResult{}, fmt.Errorf("sim: rpc: size %d and n %d must be positive", cfg.Size, cfg.N)
	}
	if cfg.Star.Hosts < 2 {
		cfg.Star.Hosts = 2
	}
	st, err := NewStar(cfg.Star)
	if err != nil {
		return RPCResult{}, err
	}
	a := &rpcApp{st: st, cfg: cfg, req: make([]byte, cfg.Size), buf: make([]byte, 64<<10), srv: map[ndp.Handle]int{}}
	for i := range a.req {
		a.req[i] = byte(i)
	}
	st.Hosts[0].App = a
	st.Hosts[1].App = a
	if err := st.Hosts[1].EP.Listen(ServicePort); err != nil {
		return RPCResult{}, err
	}
	st.Sim.At(0, a.next)
	st.Sim.Run(ndp.Time(int64(cfg.N)*int64(1e9)), func() bool { return a.err != nil || len(a.res.Latencies) == cfg.N })
	if a.err != nil {
		return a.res, a.err
	}
	if len(a.res.Latencies) != cfg.N {
		return a.res, fmt.Errorf("sim: rpc: only %d of %d RPCs completed", len(a.res.Latencies), cfg.N)
	}
	return a.res, nil
}

func (a *rpcApp) next() {
	h := a.st.Hosts[0]
	srv := a.st.Hosts[1]
	now := a.st.Sim.now
	c, err := h.EP.Dial(ndp.Addr{MAC: srv.Addr.MAC, IP: srv.Addr.IP, Port: ServicePort}, ndp.DialOptions{}, now)
	if err != nil {
		a.err = fmt.Errorf("dial: %w", err)
		return
	}
	a.cur, a.got, a.started = c, 0, now
	if n, err := h.EP.Write(c, a.req, now); err != nil || n != len(a.req) {
		a.err = fmt.Errorf("write %d of %d: %v", n, len(a.req), err)
		return
	}
	h.EP.CloseWrite(c, now)
	h.process()
}

func (a *rpcApp) Accepted(h *Host, c ndp.Handle, ev ndp.Event) { a.srv[c] = 0 }

func (a *rpcApp) Readable(h *Host, c ndp.Handle) {
	now := a.st.Sim.now
	for {
		n, err := h.EP.Read(c, a.buf)
		if h.Index == 1 {
			a.srv[c] += n
		} else if c == a.cur {
			a.got += n
		}
		if errors.Is(err, io.EOF) {
			if h.Index == 1 { // request complete: answer and close
				if a.srv[c] != a.cfg.Size {
					a.err = fmt.Errorf("server read %d of %d bytes", a.srv[c], a.cfg.Size)
					return
				}
				h.EP.Write(c, a.req, now)
				h.EP.CloseWrite(c, now)
				h.EP.Release(c)
				delete(a.srv, c)
				return
			}
			if c == a.cur {
				if a.got != a.cfg.Size {
					a.err = fmt.Errorf("client read %d of %d bytes", a.got, a.cfg.Size)
					return
				}
				a.res.Latencies = append(a.res.Latencies, now-a.started)
				h.EP.Release(c)
				a.cur = 0
				if len(a.res.Latencies) < a.cfg.N {
					a.st.Sim.After(0, a.next)
				}
			}
			return
		}
		if err != nil {
			a.err = fmt.Errorf("read: %w", err)
			return
		}
		if n == 0 {
			return
		}
	}
}

func (a *rpcApp) Writable(h *Host, c ndp.Handle) {}

func (a *rpcApp) Closed(h *Host, c ndp.Handle, err error) {
	if err != nil && a.err == nil {
		a.err = fmt.Errorf("host %d: connection closed: %w", h.Index, err)
	}
	h.EP.Release(c)
}
