package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/ndpstack/ndpstack/ndp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// brokenLink fails every transmit, as a link whose device went away does.
type brokenLink struct{ *MemLink }

var errBroken = errors.New("device gone")

func (b brokenLink) Transmit([][]byte) error { return errBroken }

// A link that fails every transmit is counted on every poll but logged at
// most once a second: idle polls spin, and must not flood the log.
func TestTransmitFailuresRateLimited(t *testing.T) {
	la, _ := NewMemPipe(MemConfig{}, macA, macB)
	core, logs := observer.New(zap.WarnLevel)
	var now ndp.Time
	s, err := New(Config{
		Link:         brokenLink{la},
		Endpoint:     ndp.Config{LocalIP: ipA, Seed: 1},
		NoBackground: true,
		Clock:        func() ndp.Time { return now },
		Logger:       zap.New(core),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const polls = 3000
	for i := 0; i < polls; i++ {
		now += ndp.Time(time.Millisecond)
		s.Poll()
	}
	st := s.Stats()
	if st.TxErrors != polls {
		t.Fatalf("TxErrors %d after %d failing polls", st.TxErrors, polls)
	}
	n := logs.FilterMessage("engine: transmit failed").Len()
	if n < 2 || n > 4 {
		t.Fatalf("%d transmit-failure logs over %d polls in 3 s, want one a second", n, polls)
	}
}
