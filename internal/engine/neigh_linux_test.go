package engine

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// neighMsg builds one RTM_NEWNEIGH message with NDA_DST and NDA_LLADDR.
func neighMsg(seq uint32, ifindex int32, state uint16, ip [4]byte, mac []byte) []byte {
	attr := func(typ uint16, v []byte) []byte {
		b := make([]byte, (4+len(v)+3)&^3)
		binary.NativeEndian.PutUint16(b, uint16(4+len(v)))
		binary.NativeEndian.PutUint16(b[2:], typ)
		copy(b[4:], v)
		return b
	}
	body := make([]byte, unix.SizeofNdMsg)
	body[0] = unix.AF_INET
	binary.NativeEndian.PutUint32(body[4:], uint32(ifindex))
	binary.NativeEndian.PutUint16(body[8:], state)
	body = append(body, attr(unix.NDA_DST, ip[:])...)
	body = append(body, attr(unix.NDA_LLADDR, mac)...)
	h := make([]byte, unix.SizeofNlMsghdr)
	binary.NativeEndian.PutUint32(h, uint32(len(h)+len(body)))
	binary.NativeEndian.PutUint16(h[4:], unix.RTM_NEWNEIGH)
	binary.NativeEndian.PutUint32(h[8:], seq)
	return append(h, body...)
}

func doneMsg(seq uint32) []byte {
	h := make([]byte, unix.SizeofNlMsghdr+4)
	binary.NativeEndian.PutUint32(h, uint32(len(h)))
	binary.NativeEndian.PutUint16(h[4:], unix.NLMSG_DONE)
	binary.NativeEndian.PutUint32(h[8:], seq)
	return h
}

func TestParseNeighDump(t *testing.T) {
	ip := [4]byte{10, 0, 0, 2}
	mac := []byte{2, 1, 2, 3, 4, 5}
	for _, tc := range []struct {
		name        string
		msg         []byte
		found, done bool
	}{
		{"reachable", append(neighMsg(7, 3, unix.NUD_REACHABLE, ip, mac), doneMsg(7)...), true, true},
		{"stale is usable", neighMsg(7, 3, unix.NUD_STALE, ip, mac), true, false},
		{"incomplete", neighMsg(7, 3, unix.NUD_INCOMPLETE, ip, mac), false, false},
		{"failed", neighMsg(7, 3, unix.NUD_FAILED, ip, mac), false, false},
		{"other interface", neighMsg(7, 4, unix.NUD_REACHABLE, ip, mac), false, false},
		{"other address", neighMsg(7, 3, unix.NUD_REACHABLE, [4]byte{10, 0, 0, 9}, mac), false, false},
		{"other request", neighMsg(6, 3, unix.NUD_REACHABLE, ip, mac), false, false},
		{"done", doneMsg(7), false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, found, done, err := parseNeighDump(tc.msg, 7, 3, ip)
			if err != nil {
				t.Fatal(err)
			}
			if found != tc.found || done != tc.done {
				t.Fatalf("found %v done %v, want %v %v", found, done, tc.found, tc.done)
			}
			if found && got != [6]byte(mac) {
				t.Fatalf("mac %x", got)
			}
		})
	}
}

func FuzzParseNeighDump(f *testing.F) {
	f.Add(neighMsg(7, 3, unix.NUD_REACHABLE, [4]byte{10, 0, 0, 2}, []byte{1, 2, 3, 4, 5, 6}))
	f.Add(doneMsg(7))
	f.Fuzz(func(t *testing.T, b []byte) {
		parseNeighDump(b, 7, 3, [4]byte{10, 0, 0, 2}) // must not panic
	})
}
