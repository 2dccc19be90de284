package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/gopacket/pcapgo"

	"github.com/ndpstack/ndpstack/internal/capture"
	"github.com/ndpstack/ndpstack/internal/testbed"
	"github.com/ndpstack/ndpstack/ndp"
)

// TestIncastCaptureDissector captures a small incast in the bridge testbed
// (`ndpperf incast --pcap DIR`: the client's stack writes every frame it
// sends and receives), and decodes the capture with tshark and
// contrib/wireshark/ndp.lua. Every frame must carry an ndp.type, and every
// field tshark shows must equal what ndp.ParseFrame reads from the same
// bytes. Incast over veth and a Linux bridge never trims (no NDP switch on
// the path), so the test appends trimmed frames the way an NDP switch makes
// them: copies of captured DATA frames cut by ndp.TrimFrame (one of them
// also returned by ndp.BounceFrame), written to the capture after the real
// ones; they must show up with ndp.flags.trimmed set. PULLs (PULL frames or
// ACKs carrying one) and DATA sent in answer to them (PULLED) come from the
// real traffic.
func TestIncastCaptureDissector(t *testing.T) {
	testbed.RequireRoot(t)
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		if os.Getenv("NDP_REQUIRE_NETNS") != "" {
			t.Fatal("tshark not on PATH but NDP_REQUIRE_NETNS is set (CI must install tshark)")
		}
		t.Skip("tshark not on PATH")
	}
	dir := t.TempDir()
	// Responses larger than the first window (93 packets at MTU 1500), so
	// that some DATA is pulled.
	if _, err := incastTestbed(incastOpts{servers: 3, size: 256 << 10, rounds: 2, rate: 10e9, pcap: dir}); err != nil {
		t.Fatal(err)
	}
	frames := readPcapng(t, filepath.Join(dir, "incast-client.pcapng"))
	if len(frames) < 100 {
		t.Fatalf("client capture holds %d frames, want the incast's (> 100)", len(frames))
	}

	// Append switch-trimmed copies of real DATA frames.
	var trimmed [][]byte
	for _, f := range frames {
		var pf ndp.Frame
		if ndp.ParseFrame(f, &pf) != nil || pf.Header.Type != ndp.TypeData || len(pf.Payload) == 0 {
			continue
		}
		c := append([]byte(nil), f...)
		n, err := ndp.TrimFrame(c)
		if err != nil {
			t.Fatal(err)
		}
		c = c[:n]
		if len(trimmed) == 2 {
			if err := ndp.BounceFrame(c); err != nil {
				t.Fatal(err)
			}
		}
		trimmed = append(trimmed, c)
		if len(trimmed) == 3 {
			break
		}
	}
	if len(trimmed) != 3 {
		t.Fatal("no DATA frames with payload in the capture")
	}
	all := append(append([][]byte(nil), frames...), trimmed...)
	path := filepath.Join(dir, "incast-client-and-trimmed.pcapng")
	w, err := capture.Create(path, capture.Config{})
	if err != nil {
		t.Fatal(err)
	}
	w.Frames(frames, capture.RX)
	w.Frames(trimmed, capture.RX)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	fields := []string{"ndp.type", "ndp.flags", "ndp.connid", "ndp.seq", "ndp.pull", "ndp.acked", "ndp.synoff", "ndp.len", "ndp.path", "ndp.flowsize", "ndp.deadline", "ndp.flags.trimmed", "ndp.flags.bounced"}
	args := []string{"-X", "lua_script:" + filepath.Join("..", "..", "contrib", "wireshark", "ndp.lua"), "-r", path, "-T", "fields", "-E", "separator=/t", "-E", "occurrence=f"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	cmd := exec.Command(tshark, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || strings.Contains(stderr.String(), "Lua") {
		t.Fatalf("tshark: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) != len(all) {
		t.Fatalf("tshark printed %d frames, the capture holds %d", len(lines), len(all))
	}
	var nTrimmed, nBounced, nPulls, nPulled int
	for i, line := range lines {
		col := strings.Split(line, "\t")
		if len(col) != len(fields) {
			t.Fatalf("frame %d: %d columns: %q", i+1, len(col), line)
		}
		var pf ndp.Frame
		if err := ndp.ParseFrame(all[i], &pf); err != nil {
			t.Fatalf("frame %d: %v", i+1, err)
		}
		h := pf.Header
		num := func(j int) uint64 {
			s := col[j]
			v, err := strconv.ParseUint(s, 0, 64) // decimal, or 0x hex

			if err != nil {
				t.Fatalf("frame %d: %s = %q: %v", i+1, fields[j], s, err)
			}
			return v
		}
		flag := func(j int) bool { return col[j] == "1" || col[j] == "True" }
		pullCol, pull := 4, uint64(h.PullCounter)
		if h.Type == ndp.TypeData && h.Flags&ndp.FlagAck != 0 {
			pullCol = 5 // the piggybacked ACK's seq
		}
		want := map[int]uint64{0: uint64(h.Type), 1: uint64(h.Flags), 2: uint64(h.ConnID), 3: uint64(h.Seq), pullCol: pull,
			6: uint64(h.SynOffset), 7: uint64(h.PayloadLen), 8: uint64(h.PathID), 9: h.FlowSize, 10: uint64(h.DeadlineUS)}
		for j, v := range want {
			if got := num(j); got != v {
				t.Errorf("frame %d: tshark %s = %d, ndp.ParseFrame %d", i+1, fields[j], got, v)
			}
		}
		if flag(11) != (h.Flags&ndp.FlagTrimmed != 0) || flag(12) != (h.Flags&ndp.FlagBounced != 0) {
			t.Errorf("frame %d: trimmed/bounced %q/%q, flags %#x", i+1, col[11], col[12], h.Flags)
		}
		if flag(11) {
			nTrimmed++
		}
		if flag(12) {
			nBounced++
		}
		if h.Type == ndp.TypePull || h.Flags&ndp.FlagPull != 0 {
			nPulls++
		}
		if h.Flags&ndp.FlagPulled != 0 {
			nPulled++
		}
	}
	if nTrimmed != 3 || nBounced != 1 || nPulls == 0 || nPulled == 0 {
		t.Fatalf("trimmed %d (want 3), bounced %d (want 1), PULLs %d, PULLED DATA %d (want some of each)", nTrimmed, nBounced, nPulls, nPulled)
	}
	t.Logf("%d frames decoded: %d PULLs, %d PULLED DATA, %d trimmed (%d bounced)", len(all), nPulls, nPulled, nTrimmed, nBounced)
}

func readPcapng(t *testing.T, path string) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewNgReader(f, pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatal(fmt.Errorf("%s: %w", path, err))
	}
	var frames [][]byte
	for {
		d, _, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return frames
		}
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, d)
	}
}
