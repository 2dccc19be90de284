// Package testbed builds throw-away network topologies out of Linux network
// namespaces and veth pairs, for tests and for ndpperf.
//
// A Testbed owns every object it creates. Names carry the process id and a
// per-process counter, so concurrent test binaries never collide:
//
//	namespace  ndp<pid>-<n>          (e.g. ndp4711-3)
//	interface  v<pid base36><n base36><a|b>   (<= 15 bytes, IFNAMSIZ-1)
//
// Addresses are whatever the caller passes (tests use 10.x.y.z/24, which
// only ever exist inside the namespaces). Close deletes the namespaces
// (which destroys the veth ends inside them); use New with t.Cleanup, or
// NewT which registers it. New also deletes namespaces of this naming scheme
// whose process no longer exists (a test binary killed before its cleanup
// ran), so a crashed run does not leave namespaces behind for long. CloseAll
// closes every open testbed of the process: ndpperf calls it when SIGINT or
// SIGTERM ends a run.
//
// Work that must happen inside a namespace (binding sockets, AF_XDP socket
// creation, attaching XDP) runs through Namespace.Do, which locks the
// goroutine to its OS thread, setns(2)es into the namespace, runs the
// function and switches back. Sockets created there stay in that namespace
// and may be used from any goroutine afterwards.
//
// Configuration goes through iproute2's `ip` command (exec), which every
// CI image has and whose errors are readable; only per-thread setns and one
// ethtool ioctl use x/sys directly. This package does not depend on
// *testing.T except for RequireRoot and NewT, so ndpperf uses it too.
package testbed
