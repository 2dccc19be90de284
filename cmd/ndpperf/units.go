package main

import (
	"fmt"
	"strconv"

	"github.com/ndpstack/ndpstack/internal/units"
)

// Flag values with units, spelled as ndpsim spells them: sizes "64KiB",
// "100MB" (KB, MB, GB are powers of 1000; KiB, MiB, GiB of 1024) and rates
// "1G", "500M" (bits per second).

// byteSize is a flag.Value holding a size in bytes.
type byteSize int64

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

func (b *byteSize) Set(s string) error {
	v, err := parseByteSize(s)
	if err != nil {
		return err
	}
	*b = byteSize(v)
	return nil
}

// parseByteSize parses "135KB", "1MiB", "9000" as bytes (internal/units).
var parseByteSize = units.ParseSize

// bitRate is a flag.Value holding a rate in bits per second.
type bitRate int64

func (r *bitRate) String() string { return formatRate(float64(*r)) }

func (r *bitRate) Set(s string) error {
	v, err := parseBitRate(s)
	if err != nil {
		return err
	}
	*r = bitRate(v)
	return nil
}

// parseBitRate parses "10G", "500M", "25e9" as bits per second (internal/units), at least 1 Mb/s and at most 1 Tb/s.
func parseBitRate(s string) (int64, error) {
	v, err := units.ParseRate(s)
	if err != nil {
		return 0, err
	}
	if v < 1e6 || v > 1e12 {
		return 0, fmt.Errorf("bad rate %q (want bits per second between 1M and 1T, e.g. 1G or 500M)", s)
	}
	return int64(v), nil
}

// formatRate prints bits per second the way parseBitRate reads them.
var formatRate = units.FormatRate
