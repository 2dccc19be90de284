package ndp

import "testing"

// TestKeyTableAgainstMap: random add, put, del, delIf and get on a small
// keyTable (long probe clusters, backward-shift deletions) agree with a Go
// map at every step.
func TestKeyTableAgainstMap(t *testing.T) {
	const max = 64
	tab := newKeyTable(max)
	ref := map[connKey]int32{}
	r := rng{s: 1}
	key := func() connKey { // few distinct keys: many hits, collisions and re-inserts
		return connKey{remoteIP: 0x0a000002, remotePort: 7, localPort: 49152, connID: uint32(r.intn(96))}
	}
	for step := 0; step < 200000; step++ {
		k, v := key(), int32(r.intn(1000))
		switch r.intn(5) {
		case 0:
			_, had := ref[k]
			ok := tab.add(k, v)
			if want := !had && len(ref) < max; ok != want {
				t.Fatalf("step %d: add(%v) = %v, want %v", step, k, ok, want)
			}
			if ok {
				ref[k] = v
			}
		case 1:
			_, had := ref[k]
			if !had && len(ref) >= max {
				continue
			}
			if !tab.put(k, v) {
				t.Fatalf("step %d: put(%v) failed with %d entries", step, k, len(ref))
			}
			ref[k] = v
		case 2:
			_, had := ref[k]
			if got := tab.del(k); got != had {
				t.Fatalf("step %d: del(%v) = %v, want %v", step, k, got, had)
			}
			delete(ref, k)
		case 3:
			old, had := ref[k]
			if r.intn(2) == 0 {
				v = old // a matching value half the time
			}
			want := had && old == v
			if got := tab.delIf(k, v, true); got != want {
				t.Fatalf("step %d: delIf(%v, %d) = %v, want %v", step, k, v, got, want)
			}
			if want {
				delete(ref, k)
			}
		default:
			want, had := ref[k]
			got, ok := tab.get(k)
			if ok != had || (had && got != want) {
				t.Fatalf("step %d: get(%v) = %d, %v, want %d, %v", step, k, got, ok, want, had)
			}
		}
		if tab.n != len(ref) {
			t.Fatalf("step %d: %d entries, want %d", step, tab.n, len(ref))
		}
	}
}
