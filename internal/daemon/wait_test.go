package daemon

import (
	"sync/atomic"
	"testing"

	"github.com/ndpstack/ndpstack/ring"
)

// TestSleepWordOffsets checks the offsets this package hard-codes for the
// sleep words (wait_unsafe.go) against ring's own Notifier: raising the
// word through our mapping must make the peer's Notify write the eventfd.
func TestSleepWordOffsets(t *testing.T) {
	area, err := ring.NewBufferArea(64, 2048)
	if err != nil {
		t.Fatal(err)
	}
	defer area.Close()
	region, err := ring.CreateRegion(ring.RegionConfig{Sockets: 2}, 1, ring.BufferGeometry{FrameSize: 2048, Frames: 64, Part: ring.Partition{First: 32, Count: 32}})
	if err != nil {
		t.Fatal(err)
	}
	defer region.Close()
	dend, err := region.DaemonEnd()
	if err != nil {
		t.Fatal(err)
	}
	att, err := dupAttachment(region.Attachment(area.FD()))
	if err != nil {
		t.Fatal(err)
	}
	closeFD(att.Buffer)
	app, err := ring.OpenRegion(att)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	aend, err := app.AppEnd()
	if err != nil {
		t.Fatal(err)
	}
	daemonWord, err := mapSleepFlag(region.FD())
	if err != nil {
		t.Fatal(err)
	}
	defer daemonWord.unmap()
	appWord, err := mapSleepWord(app.FD(), appSleepingOff)
	if err != nil {
		t.Fatal(err)
	}
	defer appWord.unmap()

	for _, tc := range []struct {
		name   string
		raise  func(v uint32)
		notify func() (bool, error)
	}{
		{"daemonSleeping", daemonWord.set, aend.Notifier.Notify},
		{"appSleeping", func(v uint32) { atomic.StoreUint32(appWord.p, v) }, dend.Notifier.Notify},
	} {
		if woke, _ := tc.notify(); woke {
			t.Fatalf("%s: Notify woke a peer that is not asleep", tc.name)
		}
		tc.raise(2) // the client counts sleepers
		if woke, err := tc.notify(); !woke || err != nil {
			t.Fatalf("%s: Notify did not see the raised word (offset wrong?): %v %v", tc.name, woke, err)
		}
		tc.raise(0)
		if woke, _ := tc.notify(); woke {
			t.Fatalf("%s: Notify still sees a sleeper", tc.name)
		}
	}
}
