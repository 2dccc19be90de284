// Package eventfd signals and drains Linux eventfd counters, the doorbells
// the rings, the AF_XDP waiters, the engine and ndpd sleep on.
//
// Signal and Drain pass an 8-byte value on the stack straight to write(2)
// and read(2): no allocation in any build (x/sys/unix's Write and Read tell
// the race detector about their buffer, which moves it to the heap under
// -race, one allocation per wakeup in the tests that count them).
package eventfd
