// Package units parses and prints the sizes and rates the command-line
// tools take ("64KiB", "100MB", "10G", "25Gbit"), one grammar for ndpd's
// config and flags, ndpperf and ndpsim.
package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseSize parses a size in bytes: a number with an optional suffix, KB,
// MB, GB (powers of 1000; K, M, G alone too), KiB, MiB, GiB (powers of
// 1024) or B, case-insensitive: "135KB", "1MiB", "9000". The result is at
// least 1 byte.
func ParseSize(s string) (int64, error) {
	units := [...]struct {
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
	v, err := strconv.ParseFloat(strings.TrimSpace(u), 64)
	if b := v * mult; err != nil || math.IsNaN(b) || b < 1 || b > math.MaxInt64/2 {
		return 0, fmt.Errorf("bad size %q (want bytes, e.g. 9000, 64KiB or 100MB)", s)
	}
	return int64(v * mult), nil
}

// ParseRate parses a rate in bits per second: a number with an optional
// k, M, G or T suffix (either case) and an optional "bit/s", "bps", "bit"
// or "b" after it: "10G", "25Gbit", "500M", "1.5e9". The result is
// positive and finite; callers bound it further.
func ParseRate(s string) (float64, error) {
	t := strings.TrimSpace(s)
	for _, suf := range [...]string{"bit/s", "bps", "bit", "b"} {
		if strings.HasSuffix(t, suf) {
			t = strings.TrimSuffix(t, suf)
			break
		}
	}
	mult := 1.0
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'k', 'K':
			mult, t = 1e3, t[:n-1]
		case 'm', 'M':
			mult, t = 1e6, t[:n-1]
		case 'g', 'G':
			mult, t = 1e9, t[:n-1]
		case 't', 'T':
			mult, t = 1e12, t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
	if r := v * mult; err != nil || math.IsNaN(r) || math.IsInf(r, 0) || r <= 0 {
		return 0, fmt.Errorf("bad rate %q (want bits per second with an optional k/M/G/T suffix, e.g. 10G or 500M)", s)
	}
	return v * mult, nil
}

// FormatRate prints a rate in bits per second as ParseRate reads it back:
// "10G", "1.5G", "200M", "9600".
func FormatRate(bps float64) string {
	switch {
	case bps >= 1e12:
		return strconv.FormatFloat(bps/1e12, 'g', -1, 64) + "T"
	case bps >= 1e9:
		return strconv.FormatFloat(bps/1e9, 'g', -1, 64) + "G"
	case bps >= 1e6:
		return strconv.FormatFloat(bps/1e6, 'g', -1, 64) + "M"
	}
	return strconv.FormatFloat(bps, 'g', -1, 64)
}
