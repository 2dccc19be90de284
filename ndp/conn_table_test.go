package ndp

import "testing"

// TestKeyTableAgainstMap: random add, put, del, delIf and get on a small
// keyTable (long probe clusters, backward-shift deletions) agree with a Go
// map at every step; the larger table has keys whose one-byte tags collide
// within a probe cluster.
func TestKeyTableAgainstMap(t *testing.T) {
	for _, tc := range []struct{ max, ids int }{{64, 96}, {1024, 1536}} {
		testKeyTableAgainstMap(t, tc.max, tc.ids)
	}
}

func testKeyTableAgainstMap(t *testing.T, max, ids int) {
	tab := newKeyTable(max)
	ref := map[connKey]int32{}
	r := rng{s: 1}
	key := func() connKey { // few distinct keys: many hits, collisions and re-inserts
		return connKey{remoteIP: 0x0a000002, remotePort: 7, localPort: 49152, connID: uint32(r.intn(ids))}
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

// TestHandleIdleTrimsTimeWait: idle calls keep time-wait below 15/16 of
// MaxTimeWait (at most idleTrimBatch entries a call, oldest first, the early
// ones counted as evictions), so a close then finds room and evicts
// nothing; without idle calls a close into a full ring evicts the oldest.
func TestHandleIdleTrimsTimeWait(t *testing.T) {
	const maxTW = 32
	a, b := mkEP(t, ipA, func(c *Config) { c.MaxTimeWait = maxTW }), mkEP(t, ipB, nil)
	closeOne := func(now Time) connKey {
		h, err := a.Dial(addrOf(b, 80), DialOptions{}, now)
		if err != nil {
			t.Fatal(err)
		}
		k := a.conn(h).key
		a.Abort(h, now)
		a.Release(h)
		return k
	}
	var keys []connKey
	for i := range maxTW + 3 {
		keys = append(keys, closeOne(Time(i)))
	}
	st := a.Stats()
	if st.TimeWaitActive != maxTW || st.TimeWaitEvicted != 3 || a.table.n != maxTW {
		t.Fatalf("full ring: %d active, %d evicted, %d in the table; want %d, 3, %d", st.TimeWaitActive, st.TimeWaitEvicted, a.table.n, maxTW, maxTW)
	}
	const keep = maxTW - maxTW/16
	now := Time(maxTW + 3) // before any entry expires
	a.HandleIdle(now)
	if got := a.Stats().TimeWaitActive; got != maxTW-idleTrimBatch {
		t.Fatalf("one idle call left %d entries, want %d", got, maxTW-idleTrimBatch)
	}
	for range 10 {
		a.HandleIdle(now)
	}
	st = a.Stats()
	if st.TimeWaitActive != keep || st.TimeWaitEvicted != 3+maxTW-keep || a.table.n != keep {
		t.Fatalf("after idle calls: %d active, %d evicted, %d in the table; want %d, %d, %d", st.TimeWaitActive, st.TimeWaitEvicted, a.table.n, keep, 3+maxTW-keep, keep)
	}
	// the oldest went first: the trimmed keys are gone, the newest remain
	for i, k := range keys {
		_, ok := a.table.get(k)
		if want := i >= len(keys)-keep; ok != want {
			t.Fatalf("key %d of %d in the table %v, want %v", i, len(keys), ok, want)
		}
	}
	// a close now finds room: nothing evicted
	closeOne(now)
	if st2 := a.Stats(); st2.TimeWaitEvicted != st.TimeWaitEvicted || st2.TimeWaitActive != keep+1 {
		t.Fatalf("close after trimming: %d evicted (was %d), %d active", st2.TimeWaitEvicted, st.TimeWaitEvicted, st2.TimeWaitActive)
	}
	// expired entries trimmed by an idle call are not evictions
	late := now + Time(a.cfg.TimeWait) + 1
	for range maxTW {
		closeOne(late - 1)
	}
	ev := a.Stats().TimeWaitEvicted
	a.HandleIdle(late + Time(a.cfg.TimeWait))
	if got := a.Stats().TimeWaitEvicted; got != ev {
		t.Fatalf("idle trim of expired entries counted %d evictions", got-ev)
	}
}

// TestAllocTakesCleanConn: a connection released since the last idle call
// lies stale on the pool's top; the next Dial takes the clean one under it
// (or a new one when the stale one is all the pool holds) and leaves the
// stale one for HandleIdle, which resets it.
func TestAllocTakesCleanConn(t *testing.T) {
	a, b := mkEP(t, ipA, nil), mkEP(t, ipB, nil)
	h0, err := a.Dial(addrOf(b, 80), DialOptions{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	c0 := a.conn(h0)
	a.Abort(h0, 0)
	a.Release(h0) // a client's pool: the one stale connection
	h1, err := a.Dial(addrOf(b, 80), DialOptions{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if a.conn(h1) == c0 || len(a.pool) != 1 || a.pool[0] != c0 || !c0.stale {
		t.Fatalf("Dial with only a stale pooled conn took it (or dropped it) instead of growing the pool")
	}
	a.HandleIdle(0) // c0 clean
	if err != nil {
		t.Fatal(err)
	}
	h2, err := a.Dial(addrOf(b, 80), DialOptions{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	c1, c2 := a.conn(h1), a.conn(h2)
	a.Abort(h2, 1)
	a.Release(h2)
	a.HandleIdle(2) // c2 clean on top
	a.Abort(h1, 3)
	a.Release(h1) // c1 stale on top of c2, no idle call since
	if n := len(a.pool); n < 2 || a.pool[n-1] != c1 || a.pool[n-2] != c2 || !c1.stale || c2.stale {
		t.Fatalf("pool top two: want stale c1 over clean c2")
	}
	h3, err := a.Dial(addrOf(b, 80), DialOptions{}, 4)
	if err != nil {
		t.Fatal(err)
	}
	if a.conn(h3) != c2 {
		t.Fatalf("Dial took %p, want the clean %p under the stale top %p", a.conn(h3), c2, c1)
	}
	if top := a.pool[len(a.pool)-1]; top != c1 || !c1.stale {
		t.Fatalf("stale conn not left on top")
	}
	a.HandleIdle(5)
	if c1.stale || c1.closed || c1.snd.nxtSeq != 0 {
		t.Fatalf("HandleIdle did not reset the stale top: stale %v closed %v", c1.stale, c1.closed)
	}
}

// TestHandleIdleResetsPooledConn: a released connection goes back to the
// pool stale; an idle call resets the one the next Dial takes, and that
// Dial does not reset it again (it gets what a reset gives either way).
func TestHandleIdleResetsPooledConn(t *testing.T) {
	a, b := mkEP(t, ipA, nil), mkEP(t, ipB, nil)
	h, err := a.Dial(addrOf(b, 80), DialOptions{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	c := a.conn(h)
	if c.snd.nxtSeq == 0 {
		t.Fatal("dialed conn has no initial sequence number")
	}
	a.Abort(h, 1)
	a.Release(h)
	if top := a.pool[len(a.pool)-1]; top != c || !c.stale || !c.closed {
		t.Fatalf("released conn: pool top %p (want %p), stale %v, closed %v", top, c, c.stale, c.closed)
	}
	a.HandleIdle(2)
	if c.stale || c.closed || c.key != (connKey{}) || c.snd.nxtSeq != 0 || c.heapIdx != -1 {
		t.Fatalf("after HandleIdle: stale %v closed %v key %v nxtSeq %d heapIdx %d", c.stale, c.closed, c.key, c.snd.nxtSeq, c.heapIdx)
	}
	h2, err := a.Dial(addrOf(b, 80), DialOptions{}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if a.conn(h2) != c || c.closed || c.stale {
		t.Fatalf("Dial after HandleIdle: conn %p (want the pooled %p), closed %v", a.conn(h2), c, c.closed)
	}
}
