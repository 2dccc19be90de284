// Package softswitch is the software switch of cmd/ndpswitch: it joins N veth
// ports over AF_XDP (one socket per port, copy mode on veth, a program that steers
// every frame to it) and runs the NDP switch discipline of internal/fabric, the
// code the simulator runs, on real frames, so NDP meets a shallow trimming buffer
// and kernel TCP meets a drop-tail one on a veth testbed.
//
// One Run loop on a locked OS thread owns everything:
//
//	port i RX ring ──Receive(64)──▶ ingress: learn source MAC, look up destination
//	                                 │ (broadcast, multicast, unknown: flood)
//	                                 ▼ copy into a queue buffer (pool, no allocation)
//	   NDP frame (IPv4/UDP to NDPPort)       any other frame (TCP, ARP, ICMP)
//	   fabric.Port of the output port:       drop-tail queue of OtherQueue frames,
//	   8-packet data queue, header queue,    ECN CE at OtherECN frames (DCTCP K)
//	   trim, return to sender (bounced headers are queued toward their sender)
//	                                 │
//	                 depart: the output port's emulated link clock `next`
//	                 advances by len*8/Rate per frame; the two classes alternate
//	                                 ▼
//	port j TX ring ◀──Transmit──── frames due by now+Horizon (copied into UMEM)
//
// The emulated rate is what makes the queues real: a frame stays in its output
// queue until the emulated link would have sent it, so a K-to-1 incast at 1 Gb/s
// fills the receiver's 8-packet port exactly as on a 1 Gb/s switch, however fast
// the veth is. Departures within Horizon (20 µs) of now go in one batch; a
// pass that runs late (the thread was not scheduled) first sends what the links
// would have sent meanwhile, up to CatchUp (20 ms) of link time, and only then
// takes the frames that arrived; a frame an internal link (a host NIC, a
// leaf-spine link) delivers at an emulated time in that interval first lets
// its output port send what it would have sent by then, so the port's queue
// is as long as a real one's. A link counts FrameOverhead bytes per frame
// beyond the frame (24 for Ethernet; 0 by default). Idle, the loop spins Spin (20 µs)
// and then sleeps in ppoll(2) on every port's socket until the next departure is
// due. With Config.Tick (ndpperf incast: 50 µs) every pass that moved frames is
// followed by a sleep of Tick, as a NIC moderates its interrupts: under a
// sustained load the loop wakes once per Tick, takes what arrived meanwhile and
// sends the next Tick's departures (Horizon = Tick + 20 µs) in one transmit call
// per port, instead of spinning and kicking a transmit per frame or two.
//
// With Config.Spines the one loop emulates a two-tier leaf-spine fabric: the
// ports are the leaves' host ports, and every leaf-spine link is an internal
// output port with its own rate whose frames reach the far switch (a pointer
// move, no copy) when their emulated transmission ends. Leaves pick the spine
// for a frame to another leaf by an XOR16 ECMP hash of its 5-tuple; spines
// send down to the destination's leaf; broadcasts flood along a tree through
// spine 0. Config.HostQueue optionally emulates each host's link into the
// switch (a NIC queue, NDP control frames first), so host bursts enter at
// the link rate.
//
// The commodity personality (TrimCommodity) runs the same fabric.Port with a
// fabric.Trimmer that classifies by DSCP only and, on a failed admission, cuts
// the arriving frame to TrimSize bytes and rewrites its DSCP, as SAI packet
// trimming does (no return to sender).
//
// The switch answers nothing itself (no ARP, no ICMP). Malformed frames are
// counted and dropped; a port whose socket fails (its interface was removed) is
// taken out of service and the others keep switching. Stats are published by the
// loop at most every millisecond while busy and whenever it goes idle.
//
// NewStar builds K hosts on one switch, NewLeafSpine two or more leaves of hosts
// on a fabric of spines, on an internal/testbed testbed, and starts the switch;
// the testbed stops it before deleting the namespaces.
package softswitch
