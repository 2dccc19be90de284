module github.com/ndpstack/ndpstack

go 1.26.0

require (
	github.com/asavie/xdp v0.3.3
	github.com/cilium/ebpf v0.22.0
	github.com/google/gopacket v1.1.19
	go.uber.org/zap v1.28.0
	golang.org/x/net v0.48.0
	golang.org/x/sys v0.49.0
)

require (
	github.com/vishvananda/netlink v1.1.0 // indirect
	github.com/vishvananda/netns v0.0.0-20191106174202-0a2b9b5464df // indirect
	go.uber.org/multierr v1.10.0 // indirect
)
