// Package ndplayer teaches gopacket to decode NDP frames: importing it
// registers LayerTypeNDP and maps UDP port ndp.DefaultPort to it, so
//
//	gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
//
// decodes Ethernet / IPv4 / UDP / NDP (and the payload). It lives apart
// from package ndp so that ndp itself imports only the standard library.
package ndplayer

import (
	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/ndpstack/ndpstack/ndp"
)

// LayerTypeNDP is the gopacket layer type of the NDP header.
var LayerTypeNDP = gopacket.RegisterLayerType(6420, gopacket.LayerTypeMetadata{
	Name:    "NDP",
	Decoder: gopacket.DecodeFunc(decodeNDP),
})

func init() { RegisterPort(ndp.DefaultPort) }

// RegisterPort makes gopacket decode UDP traffic to or from port as NDP
// (for endpoints configured with a non-default ndp.Config.UDPPort). Like
// gopacket's own registries it is not safe to call concurrently with
// decoding.
func RegisterPort(port uint16) {
	layers.RegisterUDPPortLayerType(layers.UDPPort(port), LayerTypeNDP)
}

// NDP is the decoded NDP header layer; its payload is the NDP payload.
type NDP struct {
	layers.BaseLayer
	ndp.Header
}

// LayerType returns LayerTypeNDP.
func (n *NDP) LayerType() gopacket.LayerType { return LayerTypeNDP }

// CanDecode returns LayerTypeNDP.
func (n *NDP) CanDecode() gopacket.LayerClass { return LayerTypeNDP }

// NextLayerType is the application payload.
func (n *NDP) NextLayerType() gopacket.LayerType { return gopacket.LayerTypePayload }

// DecodeFromBytes decodes an NDP header followed by its payload.
func (n *NDP) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if err := ndp.ParseHeader(data, &n.Header); err != nil {
		df.SetTruncated()
		return err
	}
	n.BaseLayer = layers.BaseLayer{Contents: data[:ndp.NDPHeaderLen], Payload: data[ndp.NDPHeaderLen:]}
	return nil
}

// SerializeTo writes the NDP header in front of the already serialised
// payload. With opts.FixLengths, PayloadLen is set from the payload
// (unless the header is marked trimmed).
func (n *NDP) SerializeTo(b gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	plen := len(b.Bytes())
	h, err := b.PrependBytes(ndp.NDPHeaderLen)
	if err != nil {
		return err
	}
	hd := n.Header
	if opts.FixLengths && hd.Flags&ndp.FlagTrimmed == 0 {
		hd.PayloadLen = uint16(plen)
	}
	ndp.PutHeader(h, &hd)
	return nil
}

func decodeNDP(data []byte, p gopacket.PacketBuilder) error {
	n := &NDP{}
	if err := n.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(n)
	return p.NextDecoder(n.NextLayerType())
}
