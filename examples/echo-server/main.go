// Command echo-server answers NDP RPCs: each request message (one
// connection) is echoed back, except "GET <n>", which is answered with n
// bytes (the incast example's responses).
//
// Run it in a network namespace joined to the client's by a veth pair
// (root; AF_XDP needs CAP_NET_ADMIN and CAP_NET_RAW):
//
//	ip netns add ndpa; ip netns add ndpb
//	ip link add va netns ndpa type veth peer name vb netns ndpb
//	ip -n ndpa addr add 10.77.0.1/24 dev va; ip -n ndpa link set va up
//	ip -n ndpb addr add 10.77.0.2/24 dev vb; ip -n ndpb link set vb up
//	ip netns exec ndpb go run ./examples/echo-server -iface vb
//	ip netns exec ndpa go run ./examples/echo-client -iface va -server 10.77.0.2:7
//	ip netns del ndpa; ip netns del ndpb     # clean up
//
// `ndpperf demo` does all of this (and removes it) for you.
package main

import (
	"bytes"
	"flag"
	"log"
	"os"
	"os/signal"
	"strconv"
	"time"

	"github.com/ndpstack/ndpstack/sockapi"
)

// maxMessage is the largest request; a larger one is reset (its client
// gets sockapi.ErrMessageTooLarge).
const maxMessage = 1 << 20

func main() {
	iface := flag.String("iface", "", "network interface (required)")
	port := flag.Uint("port", 7, "NDP port to listen on")
	busy := flag.Bool("busy", false, "busy-poll (lowest latency, burns a core)")
	readTimeout := flag.Duration("read-timeout", 10*time.Second, "how long a request may take to arrive before it is reset")
	flag.Parse()
	if *iface == "" {
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
	l, err := s.Listen(uint16(*port))
	if err != nil {
		log.Fatal(err)
	}
	if err := l.SetMessageConfig(sockapi.MessageConfig{ReadTimeout: *readTimeout}); err != nil {
		log.Fatal(err)
	}
	log.Printf("echo server on %v", l.Addr())
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt)
		<-sig
		l.Close()
	}()
	err = serve(l)
	st, _ := s.Stats()
	log.Printf("stopping: %v (messages: %+v)", err, st.Messages)
}

// serve answers messages on l until RecvMessage fails, which happens only
// when l or its stack is closed: an oversized, stalled or reset message is
// reset by the listener and counted in Stats().Messages, not returned.
func serve(l *sockapi.Listener) error {
	for {
		m, err := l.RecvMessage(maxMessage)
		if err != nil {
			return err
		}
		// Reply inline: a handler this short costs less than handing it to
		// another goroutine (a goroutine wakeup is tens to hundreds of µs
		// on a busy 2-vCPU machine; the RPC itself is ~10-20 µs). Slow
		// handlers belong in their own goroutines.
		resp := m.Data
		if rest, ok := bytes.CutPrefix(m.Data, []byte("GET ")); ok {
			if n, err := strconv.Atoi(string(rest)); err == nil && n >= 0 && n <= 64<<20 {
				resp = make([]byte, n)
			}
		}
		if err := m.Reply(resp); err != nil {
			log.Printf("reply to %v: %v", m.From, err)
		}
	}
}
