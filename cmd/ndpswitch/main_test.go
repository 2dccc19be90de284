package main

import (
	"errors"
	"flag"
	"strings"
	"testing"

	"github.com/ndpstack/ndpstack/internal/softswitch"
)

// TestFlags: -h is not an error, bad flag values are refused with a message
// naming the flag, and a configuration the switch refuses says why, all before
// any interface is touched.
func TestFlags(t *testing.T) {
	if err := run([]string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-ports", "a,b", "-rate", "fast"}, "-rate"},
		{[]string{"-ports", "a,b", "-trim", "sometimes"}, "-trim"},
		{[]string{"-ports", "a,b", "-personality", "magic"}, "-personality"},
		{[]string{"-ports", "a,b", "-trim-dscp", "64"}, "DSCP"},
		{[]string{"extra"}, "unexpected"},
		{[]string{"-ports", "a,b/c,d"}, "-spines"},
		{[]string{"-ports", "a,b/c,d", "-spines", "2", "-degrade", "1:1"}, "LEAF:SPINE:RATE"},
		{[]string{"-ports", "a,b/c,d", "-spines", "2", "-degrade", "1:5:1G"}, "no link"},
		{[]string{"-ports", "a,b", "-spines", "2"}, "leaves"},
	} {
		if err := run(tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error about %s", tc.args, err, tc.want)
		}
	}
	if err := run([]string{"-ports", "a"}); !errors.Is(err, softswitch.ErrConfig) {
		t.Fatalf("one port: %v, want ErrConfig", err)
	}
}
