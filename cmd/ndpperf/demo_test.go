package main

import (
	"encoding/json"
	"io"
	"os"
	"testing"
)

// The README's main command, run by a user without root, falls back to the
// simulator: both tables come out, with sane numbers.
func TestDemoSimFallback(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	runErr := demoSim(200, 4, 64<<10, true)
	os.Stdout = stdout
	w.Close()
	out, _ := io.ReadAll(r)
	if runErr != nil {
		t.Fatal(runErr)
	}
	var got struct {
		RPC    rpcOutput      `json:"rpc"`
		Incast []incastResult `json:"incast"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("output is not the demo's JSON: %v\n%s", err, out)
	}
	if len(got.RPC.Results) != 1 || got.RPC.Results[0].P50us <= 0 {
		t.Fatalf("RPC results %+v", got.RPC.Results)
	}
	if len(got.Incast) != 1 || got.Incast[0].MedianMs <= 0 || got.Incast[0].GoodputMbps <= 0 || got.Incast[0].Servers != 4 {
		t.Fatalf("incast results %+v", got.Incast)
	}
}
