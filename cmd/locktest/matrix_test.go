package main

import (
	"strings"
	"testing"
)

func TestMatrixBadFlagsExitTwoWithOneLine(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"matrix", "--seeds", "0"}, "--seeds must be at least 1, got 0"},
		{[]string{"matrix", "--faults", "gc-pause"}, `--faults: unknown fault class "gc-pause"`},
		{[]string{"matrix", "--impls", "no-such-lock"}, `--impls: unknown impl "no-such-lock"`},
		{[]string{"matrix", "--time", "1s"}, "--time must be at least 2s"},
		{[]string{"matrix", "--time", "soon"}, `invalid argument "soon" for "--time"`},
		{[]string{"matrix", "extra"}, "unknown command"},
	}
	for _, tt := range tests {
		out, errOut, code := locktest(t, tt.args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", tt.args, code, errOut)
		}
		if lines := strings.Split(strings.TrimSpace(errOut), "\n"); len(lines) != 1 || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: stderr %q, want one line containing %q", tt.args, errOut, tt.want)
		}
		if out != "" {
			t.Errorf("%v: stdout %q, want nothing", tt.args, out)
		}
	}
}
