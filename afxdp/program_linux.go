package afxdp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// Steering program. Written with cilium/ebpf's assembler so no clang is
// needed. Equivalent C:
//
//	SEC("xdp") int ndp_steer(struct xdp_md *ctx) {
//		void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
//		if (data + 42 > end) return XDP_PASS;               // eth(14)+ip(20)+udp(8)
//		if (eth->h_proto != htons(ETH_P_IP)) return XDP_PASS; // ARP, IPv6, VLAN: kernel
//		if (ip->ver_ihl != 0x45) return XDP_PASS;             // IPv4 options: kernel
//		if (ip->protocol != IPPROTO_UDP) return XDP_PASS;     // ICMP, TCP: kernel
//		if (ip->frag_off & htons(0x3fff)) return XDP_PASS;   // fragments: kernel
//		if (udp->dest != htons(PORT)) return XDP_PASS;        // other UDP: kernel
//		return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
//	}
//
// With Config.SteerAll the program is only the last line: every frame goes
// to the socket of its RX queue.
//
// The XDP_PASS in bpf_redirect_map's flags is the action when the XSKMAP has
// no socket for the queue (kernel 5.3+), so NDP frames on a queue we did not
// bind still reach the kernel (which answers with ICMP port unreachable or
// delivers to a kernel socket on that port).

const (
	xdpPass = 2

	offEthType  = 12
	offVerIHL   = 14
	offFragOff  = 20
	offProtocol = 23
	offUDPDst   = 36
	minUDPFrame = 42

	ctxData         = 0
	ctxDataEnd      = 4
	ctxRxQueueIndex = 16
)

// be16 returns the value a native-endian 16-bit load reads for the
// big-endian (network order) value v.
func be16(v uint16) int32 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return int32(binary.NativeEndian.Uint16(b[:]))
}

// steeringInstructions builds the program; missAction is the action when the
// XSKMAP has no socket for the queue (XDP_PASS in production; tests use
// XDP_DROP to tell "wanted the socket" from "left for the kernel").
// With all set every frame is redirected (udpPort is unused).
func steeringInstructions(udpPort uint16, missAction int32, all bool) asm.Instructions {
	if all {
		return asm.Instructions{
			asm.LoadMem(asm.R2, asm.R1, ctxRxQueueIndex, asm.Word),
			asm.LoadMapPtr(asm.R1, 0).WithReference("xsks"),
			asm.Mov.Imm(asm.R3, missAction),
			asm.FnRedirectMap.Call(),
			asm.Return(),
		}
	}
	return asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadMem(asm.R2, asm.R6, ctxData, asm.Word),
		asm.LoadMem(asm.R3, asm.R6, ctxDataEnd, asm.Word),
		asm.Mov.Reg(asm.R4, asm.R2),
		asm.Add.Imm(asm.R4, minUDPFrame),
		asm.JGT.Reg(asm.R4, asm.R3, "pass"),
		asm.LoadMem(asm.R5, asm.R2, offEthType, asm.Half),
		asm.JNE.Imm(asm.R5, be16(unix.ETH_P_IP), "pass"),
		asm.LoadMem(asm.R5, asm.R2, offVerIHL, asm.Byte),
		asm.JNE.Imm(asm.R5, 0x45, "pass"),
		asm.LoadMem(asm.R5, asm.R2, offProtocol, asm.Byte),
		asm.JNE.Imm(asm.R5, unix.IPPROTO_UDP, "pass"),
		asm.LoadMem(asm.R5, asm.R2, offFragOff, asm.Half),
		asm.And.Imm(asm.R5, be16(0x3fff)),
		asm.JNE.Imm(asm.R5, 0, "pass"),
		asm.LoadMem(asm.R5, asm.R2, offUDPDst, asm.Half),
		asm.JNE.Imm(asm.R5, be16(udpPort), "pass"),
		asm.LoadMem(asm.R2, asm.R6, ctxRxQueueIndex, asm.Word),
		asm.LoadMapPtr(asm.R1, 0).WithReference("xsks"),
		asm.Mov.Imm(asm.R3, missAction),
		asm.FnRedirectMap.Call(),
		asm.Return(),
		asm.Mov.Imm(asm.R0, xdpPass).WithSymbol("pass"),
		asm.Return(),
	}
}

// steering is the loaded program, its XSKMAP and the bpf_link that attaches
// it. The link's fd is the only thing keeping the program on the interface:
// when the process exits, the kernel closes it and detaches the program.
type steering struct {
	xsks  *ebpf.Map
	prog  *ebpf.Program
	link  link.Link
	mode  AttachMode   // the mode actually used
	users atomic.Int32 // ports sharing it (OpenEach); the last to close closes it
}

func loadSteering(iface string, ifindex int, maxQueue int, udpPort uint16, all, frags bool, mode AttachMode) (*steering, error) {
	xsks, err := ebpf.NewMap(&ebpf.MapSpec{
		Name:       "ndp_xsks",
		Type:       ebpf.XSKMap,
		KeySize:    4,
		ValueSize:  4,
		MaxEntries: uint32(maxQueue + 1),
	})
	if err != nil {
		return nil, bpfError("create XSKMAP", iface, err)
	}
	insns := steeringInstructions(udpPort, xdpPass, all)
	for i := range insns {
		if insns[i].Reference() == "xsks" {
			if err := insns[i].AssociateMap(xsks); err != nil {
				xsks.Close()
				return nil, err
			}
		}
	}
	spec := &ebpf.ProgramSpec{
		Name:         "ndp_steer",
		Type:         ebpf.XDP,
		Instructions: insns,
		License:      "Dual BSD/GPL",
	}
	if frags {
		// The program reads only the headers, which are in the first
		// buffer (data..data_end) of a multi-buffer packet.
		spec.Flags = unix.BPF_F_XDP_HAS_FRAGS
	}
	prog, err := ebpf.NewProgram(spec)
	if err != nil {
		xsks.Close()
		return nil, bpfError("load XDP program", iface, err)
	}
	s := &steering{xsks: xsks, prog: prog}
	if err := s.attach(iface, ifindex, mode); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *steering) attach(iface string, ifindex int, mode AttachMode) error {
	try := func(flags link.XDPAttachFlags) error {
		l, err := link.AttachXDP(link.XDPOptions{Program: s.prog, Interface: ifindex, Flags: flags})
		if err != nil {
			return err
		}
		s.link = l
		return nil
	}
	var err error
	switch mode {
	case AttachNative:
		err = try(link.XDPDriverMode)
		s.mode = AttachNative
	case AttachGeneric:
		err = try(link.XDPGenericMode)
		s.mode = AttachGeneric
	default:
		s.mode = AttachNative
		err = try(link.XDPDriverMode)
		if err != nil && !errors.Is(err, unix.EBUSY) && !errors.Is(err, unix.EEXIST) && !errors.Is(err, unix.EPERM) {
			s.mode = AttachGeneric
			err = try(link.XDPGenericMode)
		}
	}
	if err == nil {
		return nil
	}
	se := &SyscallError{Op: "attach XDP program (" + s.mode.String() + ")", Iface: iface, Queue: -1, Err: err}
	switch {
	case errors.Is(err, unix.EBUSY), errors.Is(err, unix.EEXIST):
		se.Sentinel = ErrProgramAttached
		se.Hint = fmt.Sprintf("another XDP program is attached to %s; see `ip link show dev %s` and remove a stale one with `ip link set dev %s xdp off`", iface, iface, iface)
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		se.Sentinel = ErrPermission
		se.Hint = "attaching XDP needs CAP_NET_ADMIN and CAP_BPF"
	case errors.Is(err, unix.ERANGE):
		se.Sentinel = ErrAttachMode
		se.Hint = fmt.Sprintf("the MTU of %s is above what its driver runs native XDP at without multi-buffer (veth: 3506 with 4 KiB pages); lower it, attach generic, or set MultiBuffer", iface)
	case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EINVAL), errors.Is(err, link.ErrNotSupported):
		se.Sentinel = ErrAttachMode
		se.Hint = "use AttachGeneric or AttachAuto"
	}
	return se
}

// register puts the socket fd for queue into the XSKMAP.
func (s *steering) register(queue int, fd int) error {
	return s.xsks.Put(uint32(queue), uint32(fd))
}

func (s *steering) close() error {
	var first error
	if s.link != nil {
		first = s.link.Close()
		s.link = nil
	}
	if s.prog != nil {
		if err := s.prog.Close(); err != nil && first == nil {
			first = err
		}
		s.prog = nil
	}
	if s.xsks != nil {
		if err := s.xsks.Close(); err != nil && first == nil {
			first = err
		}
		s.xsks = nil
	}
	return first
}

func bpfError(op, iface string, err error) error {
	se := &SyscallError{Op: op, Iface: iface, Queue: -1, Err: err}
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		se.Sentinel = ErrPermission
		se.Hint = "BPF maps and programs need CAP_BPF (or root)"
	}
	return se
}
