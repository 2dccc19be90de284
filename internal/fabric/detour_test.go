package fabric

import (
	"encoding/binary"
	"testing"

	"github.com/ndpstack/ndpstack/ndp"
)

func TestDetourPreCreditOnly(t *testing.T) {
	ports := []*Port{newPort(t, Config{}), newPort(t, Config{}), newPort(t, Config{}), newPort(t, Config{})}
	d, err := NewDetour(DetourConfig{Threshold: 2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	cands := []int{1, 2, 3}
	// An idle port: no detour.
	if got := d.Route(frame(t, ndp.TypeData, 0, 1000), 0, ports, cands); got != 0 {
		t.Fatalf("idle port detoured to %d", got)
	}
	for i := 0; i < 3; i++ {
		ports[0].Enqueue(frame(t, ndp.TypeData, uint32(i), 1000), 0)
	}
	ports[1].Enqueue(frame(t, ndp.TypeData, 9, 1000), 0)
	// A pulled packet and a control frame stay on their port.
	pulled := make([]byte, ndp.HeaderOverhead+1000)
	f := ndp.Frame{SrcMAC: macA, DstMAC: macB, SrcIP: ipA, DstIP: ipB, SrcPort: 40000, DstPort: ndp.DefaultPort,
		Header: ndp.Header{Type: ndp.TypeData, Flags: ndp.FlagPulled, SrcPort: 1, DstPort: 2, ConnID: 7, Seq: 5}, Payload: make([]byte, 1000)}
	n, err := ndp.BuildFrame(pulled, &f)
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Route(pulled[:n], 0, ports, cands); got != 0 {
		t.Fatalf("pulled packet detoured to %d", got)
	}
	if got := d.Route(frame(t, ndp.TypeAck, 0, 0), 0, ports, cands); got != 0 {
		t.Fatalf("ACK detoured to %d", got)
	}
	// A pushed packet at a congested port goes elsewhere, TTL down by one, still valid.
	seen := map[int]int{}
	for i := 0; i < 200; i++ {
		fr := frame(t, ndp.TypeData, 7, 1000)
		got := d.Route(fr, 0, ports, cands)
		if got == 0 {
			t.Fatal("pre-credit packet at a congested port not detoured")
		}
		seen[got]++
		if fr[14+8] != 63 {
			t.Fatalf("TTL %d after one detour, want 63", fr[14+8])
		}
		parse(t, fr) // checksums still valid
		// Detoured twice already: forwarded normally.
		fr[14+8] = 62
		binary.BigEndian.PutUint16(fr[24:], 0)
		if got := d.Route(fr, 0, ports, cands); got != 0 {
			t.Fatalf("packet past MaxDetours detoured to %d", got)
		}
	}
	// Two choices: the loaded port 1 is chosen only when both draws hit it.
	if seen[1] >= seen[2] || seen[1] >= seen[3] || seen[2] == 0 || seen[3] == 0 {
		t.Fatalf("port choices %v: want the loaded port 1 chosen least", seen)
	}
	if st := d.Stats(); st.Detoured != 200 || st.Capped != 200 {
		t.Fatalf("stats %+v", st)
	}
}
