package sim

import "testing"

func TestHULLRunTracksGamma(t *testing.T) {
	p1, err := hullRun(2, 1.0, 1_000_000, 2e6)
	if err != nil {
		t.Fatal(err)
	}
	p9, err := hullRun(2, 0.9, 1_000_000, 2e6)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("γ=1: %+v", p1)
	t.Logf("γ=0.9: %+v", p9)
}
