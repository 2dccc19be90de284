package main

import (
	"testing"

	"github.com/ndpstack/ndpstack/internal/testbed"
)

// TestDemoIncast runs the demo's incast (bridge testbed, NDP and kernel TCP)
// briefly: every round must complete with every byte.
func TestDemoIncast(t *testing.T) {
	testbed.RequireRoot(t)
	res, err := demoIncast(2, 32<<10, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].Transport != "ndp" || res[1].Transport != "tcp" {
		t.Fatalf("results %+v", res)
	}
	for _, r := range res {
		if r.Rounds != 3 || r.MedianMs <= 0 || r.MedianMs > r.MaxMs {
			t.Errorf("%+v", r)
		}
	}
	t.Logf("%+v", res)
}
