package sim

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/ndp"
	"github.com/ndpstack/ndpstack/pullpacer"
)

// The simulator's results are pinned bit for bit: a change meant to make the simulator
// faster (its event queue, frame buffers, per-packet path) must run the same events at
// the same times and reach the same state. Each case hashes the summary, every flow's
// completion time and byte count, every link's and switch port's counters and the event
// count. A change that alters behaviour on purpose updates the digests and says why.

// digest hashes everything a run left behind.
func digest(t *testing.T, n *Network, w *Workload, r any) string {
	t.Helper()
	h := sha256.New()
	js, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	h.Write(js)
	var b [8]byte
	put := func(v uint64) {
		binary.LittleEndian.PutUint64(b[:], v)
		h.Write(b[:])
	}
	put(n.Sim.Steps())
	put(uint64(n.Sim.Now()))
	for _, f := range w.Flows {
		put(uint64(f.End))
		put(uint64(f.Received))
		put(uint64(f.Sent))
	}
	for _, l := range n.Links {
		fmt.Fprintf(h, "%+v", l.Stats())
	}
	for _, sw := range n.Switches {
		for i := 0; i < sw.Ports(); i++ {
			fmt.Fprintf(h, "%+v", sw.Port(i).Stats())
		}
		put(sw.Unroutable)
	}
	for _, ho := range n.Hosts {
		fmt.Fprintf(h, "%+v%+v", ho.EP.Stats(), ho.Stats)
	}
	return fmt.Sprintf("%x", h.Sum(nil)[:12])
}

func goldenFlows(hosts []int, dst int, size int64) []*Flow {
	flows := make([]*Flow, len(hosts))
	for i, s := range hosts {
		flows[i] = &Flow{ID: uint64(i + 1), Src: s, Dst: dst, Size: size}
	}
	return flows
}

func TestGoldenResults(t *testing.T) {
	cases := []struct {
		name  string
		want  string
		build func(t *testing.T, bytes bool) (*Network, []*Flow)
	}{
		{"star incast 7x300KB", "99d8f6ad17215cb11692e55e", func(t *testing.T, bytes bool) (*Network, []*Flow) {
			st, err := NewStar(withHosts(paperStar(9000), 8, bytes))
			if err != nil {
				t.Fatal(err)
			}
			return st.Network, goldenFlows([]int{1, 2, 3, 4, 5, 6, 7}, 0, 300_000)
		}},
		{"star incast 40x135KB bounces", "46d9a1ac0836d60042f40726", func(t *testing.T, bytes bool) (*Network, []*Flow) {
			cfg := paperStar(9000)
			cfg.Fabric.HeaderQueueBytes = 2000
			st, err := NewStar(withHosts(cfg, 41, bytes))
			if err != nil {
				t.Fatal(err)
			}
			src := make([]int, 40)
			for i := range src {
				src[i] = i + 1
			}
			return st.Network, goldenFlows(src, 0, 135_000)
		}},
		{"star faulty transfer 1500", "bec153b49f001ea256fa3270", func(t *testing.T, bytes bool) (*Network, []*Flow) {
			cfg := paperStar(1500)
			cfg.Endpoint.RTO = 200 * time.Microsecond
			cfg.Faults = Faults{Loss: 0.01, Duplicate: 0.01, Reorder: 0.01, Corrupt: 0.01}
			st, err := NewStar(withHosts(cfg, 2, bytes))
			if err != nil {
				t.Fatal(err)
			}
			return st.Network, goldenFlows([]int{1}, 0, 1_000_000)
		}},
		{"star hull gamma 0.9 phantom", "50d1eb389ca6e52728e7d6be", func(t *testing.T, bytes bool) (*Network, []*Flow) {
			cfg := paperStar(1500)
			cfg.Pulls = pullpacer.QueueConfig{Gamma: 0.9}
			cfg.Fabric.PhantomRate = 0.9 * cfg.LinkRate
			st, err := NewStar(withHosts(cfg, 4, bytes))
			if err != nil {
				t.Fatal(err)
			}
			return st.Network, goldenFlows([]int{1, 2, 3}, 0, 500_000)
		}},
		{"star d3 deadlines", "a6a554a05cbfa569cfb22f6f", func(t *testing.T, bytes bool) (*Network, []*Flow) {
			cfg := paperStar(1500)
			cfg.Pulls = pullpacer.QueueConfig{Policy: pullpacer.PolicyDeadline}
			st, err := NewStar(withHosts(cfg, 9, bytes))
			if err != nil {
				t.Fatal(err)
			}
			flows := goldenFlows([]int{1, 2, 3, 4, 5, 6, 7, 8}, 0, 200_000)
			for i, f := range flows {
				f.Opts.Size = f.Size
				f.Opts.Deadline = ndp.Time(300_000 + 100_000*i)
			}
			return st.Network, flows
		}},
		{"fattree k4 permutation path", "e67ea01f8f3d711f37a954b6", func(t *testing.T, bytes bool) (*Network, []*Flow) {
			return goldenPermutation(t, ECMPPath, bytes)
		}},
		{"fattree k4 permutation hash", "c3474033002c5a71949a1673", func(t *testing.T, bytes bool) (*Network, []*Flow) {
			return goldenPermutation(t, ECMPHash, bytes)
		}},
		{"fattree k4 permutation random", "2eac91f9c9b39f1c3a3bb42c", func(t *testing.T, bytes bool) (*Network, []*Flow) {
			return goldenPermutation(t, ECMPRandom, bytes)
		}},
		{"fattree k4 incast 15x135KB", "544ba4c042e52f75264bb152", func(t *testing.T, bytes bool) (*Network, []*Flow) {
			ft := fatTree(4, ECMPHash)
			ft.Params.CheckBytes = bytes
			c, err := NewClos(ft)
			if err != nil {
				t.Fatal(err)
			}
			src := make([]int, 15)
			for i := range src {
				src[i] = i + 1
			}
			return c.Network, goldenFlows(src, 0, 135_000)
		}},
	}
	// Every case runs twice: with the endpoints carrying lengths only (ndp's
	// ZeroPayload, the default) and with real payload bytes each checked by the
	// receiver (CheckBytes). Both make the same events and reach the same digest.
	for _, tc := range cases {
		for _, bytes := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/bytes=%v", tc.name, bytes), func(t *testing.T) {
				n, flows := tc.build(t, bytes)
				if n.CheckBytes() != (bytes || n.p.Faults.Corrupt > 0) {
					t.Fatalf("CheckBytes() = %v with CheckBytes %v", n.CheckBytes(), bytes)
				}
				r, w, err := run(n, flows, 0, nil)
				if err != nil {
					t.Fatal(err)
				}
				got := digest(t, n, w, r)
				if got != tc.want {
					t.Errorf("digest %s, want %s (events %d, last FCT %.3f us, verified %v)", got, tc.want, r.Events, r.LastFCTus, r.BytesVerified)
				}
			})
		}
	}
}

func withHosts(c StarConfig, n int, bytes bool) StarConfig {
	c.Hosts, c.CheckBytes = n, bytes
	return c
}

func goldenPermutation(t *testing.T, ecmp ECMPMode, bytes bool) (*Network, []*Flow) {
	ft := fatTree(4, ecmp)
	ft.Params.CheckBytes = bytes
	c, err := NewClos(ft)
	if err != nil {
		t.Fatal(err)
	}
	dst := derangement(len(c.Hosts), 1)
	flows := make([]*Flow, len(c.Hosts))
	for i := range flows {
		flows[i] = &Flow{ID: uint64(i + 1), Src: i, Dst: dst[i], Size: 500_000}
	}
	return c.Network, flows
}
