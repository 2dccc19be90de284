package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
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

// parseByteSize parses "135KB", "1MiB", "9000" as bytes (at least 1).
func parseByteSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   float64
	}{{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9},
		{"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"B", 1}}
	u := strings.ToUpper(strings.TrimSpace(s))
	mult := 1.0
	for _, x := range units {
		if strings.HasSuffix(u, x.suffix) {
			mult, u = x.mult, strings.TrimSuffix(u, x.suffix)
			break
		}
	}
	v, err := strconv.ParseFloat(u, 64)
	if err != nil || v*mult < 1 || v*mult > math.MaxInt64/2 || math.IsNaN(v) {
		return 0, fmt.Errorf("bad size %q (want bytes, e.g. 65536, 64KiB or 100MB)", s)
	}
	return int64(v * mult), nil
}

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

// parseBitRate parses "10G", "500M", "25e9" as bits per second (at least 1 Mb/s).
func parseBitRate(s string) (int64, error) {
	mult := 1.0
	u := strings.ToUpper(strings.TrimSuffix(strings.TrimSuffix(strings.TrimSpace(s), "bps"), "b"))
	switch {
	case strings.HasSuffix(u, "K"):
		mult, u = 1e3, u[:len(u)-1]
	case strings.HasSuffix(u, "M"):
		mult, u = 1e6, u[:len(u)-1]
	case strings.HasSuffix(u, "G"):
		mult, u = 1e9, u[:len(u)-1]
	}
	v, err := strconv.ParseFloat(u, 64)
	if err != nil || math.IsNaN(v) || v*mult < 1e6 || v*mult > 1e12 {
		return 0, fmt.Errorf("bad rate %q (want bits per second between 1M and 1T, e.g. 1G or 500M)", s)
	}
	return int64(v * mult), nil
}

func formatRate(bps float64) string {
	switch {
	case bps >= 1e9:
		return strconv.FormatFloat(bps/1e9, 'g', 4, 64) + "G"
	case bps >= 1e6:
		return strconv.FormatFloat(bps/1e6, 'g', 4, 64) + "M"
	}
	return strconv.FormatFloat(bps, 'g', 4, 64)
}
