// Command echo-client makes NDP echo RPCs, each on a new connection (the
// zero-RTT case), and prints latency percentiles.
//
// Start examples/echo-server first; see its doc comment for a two-namespace
// veth testbed. Then, in the client's namespace:
//
//	ip netns exec ndpa go run ./examples/echo-client -iface va -server 10.77.0.2:7 -n 1000
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"sort"
	"time"

	"github.com/ndpstack/ndpstack/sockapi"
)

func main() {
	iface := flag.String("iface", "", "network interface (required)")
	server := flag.String("server", "", "server address ip:port (required)")
	n := flag.Int("n", 1000, "RPCs")
	size := flag.Int("size", 1024, "request bytes")
	busy := flag.Bool("busy", false, "busy-poll")
	flag.Parse()
	if *iface == "" || *server == "" {
		flag.Usage()
		os.Exit(2)
	}
	cfg := sockapi.Config{Interface: *iface}
	if *busy {
		cfg.PollMode = sockapi.PollBusy
	}
	s, err := sockapi.Open(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	addr, err := sockapi.ParseAddr(*server)
	if err != nil {
		log.Fatal(err)
	}
	req := bytes.Repeat([]byte{'x'}, *size)
	resp := make([]byte, *size)
	lat := make([]time.Duration, 0, *n)
	for i := 0; i < *n; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		t0 := time.Now()
		m, err := s.CallInto(ctx, addr, req, resp)
		d := time.Since(t0)
		cancel()
		if err != nil {
			log.Fatalf("rpc %d: %v", i, err)
		}
		if !bytes.Equal(resp[:m], req) {
			log.Fatalf("rpc %d: echo differs", i)
		}
		lat = append(lat, d)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))] }
	fmt.Printf("%d RPCs of %d bytes, new connection each: p50 %v p90 %v p99 %v max %v\n",
		len(lat), *size, q(0.5), q(0.9), q(0.99), lat[len(lat)-1])
}
