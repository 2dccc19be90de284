// Package fabric is the NDP switch queue discipline, shared by the software switch
// (cmd/ndpswitch) and the simulator (internal/sim). It is sans-IO: frames and `now` in,
// frames out; it owns no goroutines, clocks or sockets.
//
// One Port models one switch output port (NDP paper section 3.1, Figure 3):
//
//	           arrival
//	              │
//	   data frame │ header / ACK / NACK / PULL / trimmed / bounced
//	      ┌───────┴─────────────────────────────┐
//	      ▼                                     ▼
//	data queue (8 pkts)   full? trim  ───▶  header queue (bytes)
//	trim arrival or tail, p = 1/2 each       full? return to sender
//	      │                                     │     (trimmed data headers only)
//	      └──────────── WRR: 10 headers : 1 data ┘
//	                         │
//	                    Dequeue(now) ──▶ link
//
// Frames are the caller's byte slices; a Port queues them without copying and modifies
// them in place when it trims (ndp.TrimFrame), bounces (ndp.BounceFrame) or marks them
// (phantom queue ECN). A frame handed to Enqueue belongs to the Port until it comes back
// from Dequeue or as a bounce or drop verdict.
//
// Which frames are data the port may trim, which go to the header queue and how a
// frame is trimmed is NDP's parsing by default (the NDP-aware switch); Config.Trimmer
// replaces it for a switch that does not parse NDP (the software switch's commodity
// personality classifies by DSCP and cuts frames to a fixed size). Admission, the
// queues, WRR and the phantom queue are the same code either way.
//
// The optional phantom queue (HULL, papers/hull-nsdi12.txt section 3) is a counter that
// grows with every byte the port sends and drains at γ·C; while it is above its threshold
// the port marks ECN CE on the IPv4 header of departing frames. It never delays a frame:
// it shows how much headroom a sending pattern leaves.
//
// Detour (detour.go) is OPF's forwarding decision (papers/opf-proactive-transport.txt):
// a switch asks it, after routing, whether a pre-credit packet meeting a congested port
// should leave by a less loaded port toward another switch instead.
package fabric
