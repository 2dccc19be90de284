// Package sim is a discrete-event simulator for NDP that runs the code that ships: each
// simulated host drives a real ndp.Endpoint and a real pullpacer.PullQueue on a virtual
// clock, and each switch port is an internal/fabric Port trimming real frames.
//
// The pieces:
//
//	Sim     event queue ordered by (time, sequence); At/After schedule closures
//	Link    one direction of a cable: serializes frames at Rate (plus Ethernet's
//	        preamble, FCS and inter-frame gap), delivers them Delay later, and can
//	        inject loss, duplication, reordering and corruption
//	Switch  one fabric.Port per output link; forwards by destination IPv4 address and
//	        routes return-to-sender headers back
//	Host    an ndp.Endpoint, the host's pull queue and NIC link, plus the application
//	        callbacks of the workload (send a pattern, verify what arrives)
//
// A host's NIC pulls its next frame from the endpoint only when the link goes idle, as
// a real NIC's descriptor ring would; the pull queue's release times become events.
// Everything is deterministic for a given seed.
package sim
