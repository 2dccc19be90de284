// Package sim is a discrete-event simulator for NDP that runs the code that ships: each
// simulated host drives a real ndp.Endpoint and a real pullpacer.PullQueue on a virtual
// clock, and each switch port is an internal/fabric Port trimming real frames.
//
// The pieces:
//
//	Sim      event queue ordered by (time, sequence): a 4-ary heap of small keys over a
//	         recycled slab of typed events (no allocation per event); At/After
//	         schedule closures for workload events
//	Link     one direction of a cable: serializes frames at Rate (plus Ethernet's
//	         preamble, FCS and inter-frame gap), delivers them Delay later, and can
//	         inject loss, duplication, reordering and corruption
//	Switch   one fabric.Port per output link; forwards by destination IPv4 address,
//	         sends frames for destinations not below it up one of its uplinks (ECMP),
//	         and routes return-to-sender headers back
//	Host     an ndp.Endpoint, the host's pull queue and NIC link, plus the application
//	         callbacks of the workload (send a pattern, verify what arrives)
//	Network  hosts, switches and links of one topology: Star (every host on one
//	         switch) or Clos (a k-ary FatTree, or a two-tier leaf-spine)
//	Workload flows between hosts; every flow's bytes are counted in, and with
//	         Params.CheckBytes each received byte is checked against the sender's
//	         deterministic pattern
//
// Payload: by default the endpoints carry lengths, not bytes (ndp.Config.ZeroPayload):
// frames have their full lengths, so serialization, queues, trimming and every protocol
// decision are those of real payloads, but no payload byte is written, copied,
// checksummed or read. Params.CheckBytes (ndpsim --check-bytes) carries and checks real
// bytes; both make the same events (TestGoldenResults runs every case both ways).
//
// A frame's journey in a FatTree: the sender's endpoint builds it into a buffer when
// the host's NIC link goes idle (as a real NIC's descriptor ring would); the link
// serializes it and hands it to the edge switch, which either has a route to the
// destination (same rack) or picks an uplink by ECMP: a hash of the IPv4 5-tuple with a
// per-switch salt (ECMPHash: the UDP source port is NDP's per-packet path entropy, so a
// connection's packets spray over the uplinks its ports hash to), the sender's path
// index read from the source port (ECMPPath: the paper's sender-chosen paths), or a
// random uplink per frame (ECMPRandom). Aggregation switches do the same toward the
// core; core and aggregation switches route down by destination. At each hop the
// output port's fabric queue may trim the frame or return its header to the sender.
//
// The pull queue's release times and the endpoint's timers become events; a host
// re-arms its timer after every transmission as well as after every arrival.
// Everything is deterministic for a given seed.
//
// Experiments: RunIncast (N senders to host 0, star or Clos), RunTransfer (one flow over
// faulty links), RunPermutation (every host sends to one and receives from one, Clos)
// and RunRPC (closed-loop request/response on a star). Reproductions (reproduce.go,
// repro_*.go) rerun the HULL, D3, OPF and OMNeT++-model papers' experiments and return
// tables of ours beside the papers' numbers (ndpsim reproduce). Params.Detour turns on
// OPF (fabric.Detour) at every switch; Switch.Probe samples one port's queueing delay.
package sim
