package sockapi_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/netip"
	"strings"

	"github.com/ndpstack/ndpstack/sockapi"
)

// Two stacks joined by an in-memory cable: an echo RPC with the message API.
func Example() {
	a, b, err := sockapi.OpenPipe(sockapi.Config{}, netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"))
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	defer b.Close()

	l, err := b.Listen(7)
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		for {
			m, err := l.RecvMessage(0)
			if err != nil {
				return
			}
			m.Reply([]byte(strings.ToUpper(string(m.Data))))
		}
	}()

	resp, err := a.Call(context.Background(), "10.0.0.2:7", []byte("hello, ndp"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(resp))
	// Output: HELLO, NDP
}

// A net.Conn stream: Dial, write, half-close, read the answer to EOF.
func ExampleStack_Dial() {
	a, b, err := sockapi.OpenPipe(sockapi.Config{}, netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"))
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	defer b.Close()
	l, _ := b.Listen(9)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		data, _ := io.ReadAll(c)
		fmt.Fprintf(c, "got %d bytes", len(data))
	}()

	c, err := a.Dial(context.Background(), "10.0.0.2:9")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("zero-RTT: this leaves at once"))
	c.CloseWrite()
	resp, _ := io.ReadAll(c)
	fmt.Println(string(resp))
	// Output: got 29 bytes
}

// Opening a stack on a real interface (AF_XDP) needs root; run it inside
// the interface's network namespace. Not executed by go test.
func ExampleOpen() {
	s, err := sockapi.Open(sockapi.Config{
		Interface: "veth0",
		LinkRate:  10e9,
		PollMode:  sockapi.PollBusy,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	resp, err := s.Call(context.Background(), "10.1.0.2:7", []byte("ping"),
		sockapi.WithSize(4), sockapi.WithPriority(1))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(resp))
}
