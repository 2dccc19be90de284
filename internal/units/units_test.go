package units

import "testing"

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		bad  bool
	}{
		{"9000", 9000, false}, {"135KB", 135000, false}, {"64KiB", 65536, false}, {"1MiB", 1 << 20, false},
		{"100MB", 100e6, false}, {"2gib", 2 << 30, false}, {"1k", 1000, false}, {" 12 B ", 12, false},
		{"1.5MB", 1.5e6, false},
		{"", 0, true}, {"0", 0, true}, {"-5KB", 0, true}, {"KB", 0, true}, {"NaN", 0, true}, {"1e30GB", 0, true}, {"12XB", 0, true},
	} {
		got, err := ParseSize(tc.in)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v", tc.in, got, err)
		}
	}
}

func TestParseRateAndFormat(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		bad  bool
	}{
		{"10G", 10e9, false}, {"25Gbit", 25e9, false}, {"500M", 500e6, false}, {"1.5g", 1.5e9, false},
		{"1000Mbps", 1e9, false}, {"100k", 1e5, false}, {"1T", 1e12, false}, {"9600", 9600, false},
		{"40Gb", 40e9, false}, {"10Gbit/s", 10e9, false},
		{"", 0, true}, {"0", 0, true}, {"-1G", 0, true}, {"G", 0, true}, {"Inf", 0, true}, {"10GB", 0, true},
	} {
		got, err := ParseRate(tc.in)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("ParseRate(%q) = %g, %v", tc.in, got, err)
			continue
		}
		if !tc.bad {
			back, err := ParseRate(FormatRate(got))
			if err != nil || back != got {
				t.Errorf("FormatRate(%g) = %q reads back as %g, %v", got, FormatRate(got), back, err)
			}
		}
	}
}
