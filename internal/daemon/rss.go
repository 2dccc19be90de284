package daemon

import "net/netip"

// RSS is a NIC's receive-side scaling for NDP's frames, as ndpd read it
// (ReadRSS): the Toeplitz key, the indirection table (hash → NIC queue)
// and the queues the daemon serves, in attach-index order. With it an
// application places a dial on the queue the NIC will deliver the peer's
// answers to (PlaceRSS).
type RSS struct {
	Key    []byte   `json:"key"`
	Indir  []uint32 `json:"indir"`
	Served []int    `json:"served"` // NIC queue of each attach index
}

// Hash is the Toeplitz hash of an IPv4 frame from src to dst hashed on
// addresses only (ethtool rx-flow-hash udp4 sd): the input is the source
// address then the destination address, as the NIC reads them.
func (r *RSS) Hash(src, dst netip.Addr) uint32 {
	s, d := src.Unmap().As4(), dst.Unmap().As4()
	in := [8]byte{s[0], s[1], s[2], s[3], d[0], d[1], d[2], d[3]}
	return toeplitz(r.Key, in[:])
}

// Index is the attach index of the queue the NIC delivers frames from
// peer to local to, and false when the hash leads to a queue the daemon
// does not serve (or r is unusable).
func (r *RSS) Index(peer, local netip.Addr) (int, bool) {
	if len(r.Indir) == 0 || len(r.Key) < 12 {
		return 0, false
	}
	q := r.Indir[r.Hash(peer, local)%uint32(len(r.Indir))]
	for i, s := range r.Served {
		if uint32(s) == q {
			return i, true
		}
	}
	return 0, false
}

// toeplitz hashes in with key (at least len(in)+4 bytes): for every set
// bit of the input, most significant first, the 32 key bits starting at
// that bit's position are XORed into the result.
func toeplitz(key, in []byte) uint32 {
	if len(key) < len(in)+4 {
		return 0
	}
	var h uint32
	window := uint32(key[0])<<24 | uint32(key[1])<<16 | uint32(key[2])<<8 | uint32(key[3])
	for i, b := range in {
		next := key[i+4]
		for bit := 7; bit >= 0; bit-- {
			if b&(1<<bit) != 0 {
				h ^= window
			}
			window = window<<1 | uint32(next>>bit&1)
		}
	}
	return h
}
