// Command incast is a fan-out client: each round it asks every server at
// once for a response of -size bytes (a new NDP connection per request) and
// measures when the last response has fully arrived: the incast pattern
// NDP's receiver-driven pulls are built for (paper section 5.1, Figure 9).
//
// Run examples/echo-server on each server: one stack owns an interface
// queue, so each server needs its own namespace and veth pair to the
// client's namespace (`ndpperf demo` builds such a testbed and runs an
// incast itself). With the testbed of echo-server's doc comment plus a
// second pair (va1 in ndpa with 10.77.1.1/24, vb1 in ndpc with 10.77.1.2/24):
//
//	ip netns exec ndpb go run ./examples/echo-server -iface vb &
//	ip netns exec ndpc go run ./examples/echo-server -iface vb1 &
//
// The client needs one stack per interface too, so it fans out over one
// interface to servers reachable through it; on a two-host veth testbed use
// a single server several times:
//
//	ip netns exec ndpa go run ./examples/incast -iface va -servers 10.77.0.2:7,10.77.0.2:7,10.77.0.2:7 -size 100000
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ndpstack/ndpstack/sockapi"
)

func main() {
	iface := flag.String("iface", "", "network interface (required)")
	servers := flag.String("servers", "", "comma-separated server addresses ip:port (required)")
	size := flag.Int("size", 100_000, "response bytes per server")
	rounds := flag.Int("rounds", 20, "fan-out rounds")
	flag.Parse()
	if *iface == "" || *servers == "" {
		flag.Usage()
		os.Exit(2)
	}
	s, err := sockapi.Open(sockapi.Config{Interface: *iface})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	addrs := strings.Split(*servers, ",")
	req := []byte(fmt.Sprintf("GET %d", *size))
	var times []time.Duration
	for r := 0; r < *rounds; r++ {
		t0 := time.Now()
		var wg sync.WaitGroup
		errs := make([]error, len(addrs))
		for i, a := range addrs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				resp, err := s.Call(ctx, a, req, sockapi.WithSize(int64(len(req))))
				if err == nil && len(resp) != *size {
					err = fmt.Errorf("%s: %d of %d bytes", a, len(resp), *size)
				}
				errs[i] = err
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				log.Fatal(err)
			}
		}
		times = append(times, time.Since(t0))
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	fmt.Printf("%d-to-1 incast of %d-byte responses, %d rounds: median %v, p90 %v, max %v\n",
		len(addrs), *size, len(times), times[len(times)/2], times[int(0.9*float64(len(times)-1))], times[len(times)-1])
}
