package pullpacer

import (
	"runtime"
	"testing"
)

func TestSPSCRingFullEmpty(t *testing.T) {
	r := newSPSC[int](3) // rounds to 4
	if r.capacity() != 4 {
		t.Fatalf("capacity %d", r.capacity())
	}
	for i := 0; i < 4; i++ {
		if !r.push(i) {
			t.Fatalf("push %d refused", i)
		}
	}
	if r.push(9) {
		t.Fatal("push into a full ring")
	}
	if _, ok := r.pop(); ok {
		t.Fatal("popped before publish")
	}
	r.publish()
	for i := 0; i < 4; i++ {
		if v, ok := r.pop(); !ok || v != i {
			t.Fatalf("pop = %d,%v want %d", v, ok, i)
		}
	}
	if r.push(9) {
		t.Fatal("slots reused before release")
	}
	r.release()
	if !r.push(9) || r.free() != 3 {
		t.Fatal("slots not reusable after release")
	}
}

// TestSPSCRingConcurrent streams values through a small ring between two goroutines;
// with -race it checks the ordering argument in spsc.go.
func TestSPSCRingConcurrent(t *testing.T) {
	r := newSPSC[[4]uint64](64)
	const n = 200000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := uint64(0); i < n; {
			if r.push([4]uint64{i, i * 3, ^i, i}) {
				i++
				if i%7 == 0 {
					r.publish()
				}
				continue
			}
			r.publish()
			runtime.Gosched()
		}
		r.publish()
	}()
	for want := uint64(0); want < n; {
		v, ok := r.pop()
		if !ok {
			r.release()
			runtime.Gosched()
			continue
		}
		if v != [4]uint64{want, want * 3, ^want, want} {
			t.Fatalf("got %v, want %d", v, want)
		}
		want++
		if want%5 == 0 {
			r.release()
		}
	}
	<-done
}
