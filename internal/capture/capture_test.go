package capture

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/google/gopacket/pcapgo"
)

func frame(n int, b byte) []byte {
	f := make([]byte, n)
	for i := range f {
		f[i] = b
	}
	return f
}

func readAll(t *testing.T, path string) (data [][]byte, ifaces []int, wire []int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewNgReader(f, pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatal(err)
	}
	for {
		d, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, d)
		ifaces = append(ifaces, ci.InterfaceIndex)
		wire = append(wire, ci.Length)
	}
}

func TestWriteAndReadBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.pcapng")
	w, err := Create(path, Config{SnapLen: 100})
	if err != nil {
		t.Fatal(err)
	}
	w.Frames([][]byte{frame(60, 1), frame(150, 2)}, RX)
	w.Frames([][]byte{frame(70, 3)}, TX)
	w.Frames(nil, TX)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v, want ErrClosed", err)
	}
	data, ifaces, wire := readAll(t, path)
	if len(data) != 3 {
		t.Fatalf("read %d frames, want 3", len(data))
	}
	want := []struct {
		n, wire, iface int
		b              byte
	}{{60, 60, 0, 1}, {100, 150, 0, 2}, {70, 70, 1, 3}}
	for i, w := range want {
		if len(data[i]) != w.n || wire[i] != w.wire || ifaces[i] != w.iface || !bytes.Equal(data[i], frame(w.n, w.b)) {
			t.Errorf("frame %d: %d bytes (wire %d) on interface %d, want %d (%d) on %d", i, len(data[i]), wire[i], ifaces[i], w.n, w.wire, w.iface)
		}
	}
	st := w.Stats()
	fi, _ := os.Stat(path)
	if st.Frames != 3 || st.Dropped != 0 || st.Truncated != 0 || int64(st.Bytes) != fi.Size() {
		t.Errorf("stats %+v, file %d bytes", st, fi.Size())
	}
}

// TestMaxBytesStops: the file never grows past MaxBytes; what did not fit
// is counted, and the file stays readable.
func TestMaxBytesStops(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.pcapng")
	const max = 64 << 10
	w, err := Create(path, Config{MaxBytes: max, SnapLen: 1500, Buffer: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	// 16 calls of 40 frames: each call fills one of the 16 chunks, so
	// nothing is dropped whatever the writer's pace; 640 KB > MaxBytes.
	var batch [][]byte
	for i := range 40 {
		batch = append(batch, frame(1000, byte(i)))
	}
	for range chunks {
		w.Frames(batch, TX)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > max {
		t.Fatalf("file %d bytes > MaxBytes %d", fi.Size(), max)
	}
	data, _, _ := readAll(t, path)
	st := w.Stats()
	if uint64(len(data)) != st.Frames || st.Frames+st.Truncated != 640 || st.Dropped != 0 || st.Truncated == 0 {
		t.Fatalf("read %d frames, stats %+v: want frames+truncated = 640, some truncated, none dropped", len(data), st)
	}
}

// blockedWriter blocks every Write until released: the disk is stuck.
type blockedWriter struct {
	armed   atomic.Bool
	release chan struct{}
}

func (b *blockedWriter) Write(p []byte) (int, error) {
	if b.armed.Load() {
		<-b.release
	}
	return len(p), nil
}

// TestFullBufferDrops: with the writer stuck, Frames still returns (it
// never waits for the disk) and counts the frames it could not keep.
func TestFullBufferDrops(t *testing.T) {
	bw := &blockedWriter{release: make(chan struct{})}
	w, err := New(bw, Config{SnapLen: 1500, Buffer: 16 * 2048})
	if err != nil {
		t.Fatal(err)
	}
	bw.armed.Store(true)
	f := [][]byte{frame(1500, 1)}
	for range 1000 {
		w.Frames(f, RX)
	}
	st := w.Stats()
	if st.Dropped == 0 {
		t.Fatalf("stats %+v: want drops with the writer stuck", st)
	}
	close(bw.release)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st = w.Stats()
	if st.Frames+st.Dropped != 1000 {
		t.Fatalf("stats %+v: frames + dropped != 1000", st)
	}
}

func TestFramesAllocatesNothing(t *testing.T) {
	w, err := New(io.Discard, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	batch := [][]byte{frame(1500, 1), frame(64, 2)}
	if a := testing.AllocsPerRun(100, func() { w.Frames(batch, TX) }); a != 0 {
		t.Fatalf("Frames allocates %v per call", a)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []Config{{MaxBytes: 100}, {SnapLen: 10}, {Buffer: 1000}} {
		if _, err := New(io.Discard, c); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}
