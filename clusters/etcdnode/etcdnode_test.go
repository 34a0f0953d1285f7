package etcdnode

import (
	"context"
	"strings"
	"testing"
)

// Bad command lines are refused with an error naming the flag, before any
// server starts.
func TestMainRejectsBadFlags(t *testing.T) {
	dir := t.TempDir()
	good := map[string]string{
		"name": "n1", "data-dir": dir, "listen-client-urls": "http://127.0.0.1:1",
		"listen-peer-urls": "http://127.0.0.1:2", "initial-cluster": "n1=http://127.0.0.1:2",
	}
	args := func(change map[string]string) []string {
		var out []string
		for k, v := range good {
			if nv, ok := change[k]; ok {
				v = nv
			}
			if v != "" {
				out = append(out, "--"+k, v)
			}
		}
		for k, v := range change {
			if _, ok := good[k]; !ok {
				out = append(out, "--"+k, v)
			}
		}
		return out
	}
	for _, tc := range []struct {
		change map[string]string
		want   string
	}{
		{map[string]string{"name": ""}, "--name is required"},
		{map[string]string{"data-dir": ""}, "--data-dir is required"},
		{map[string]string{"initial-cluster": ""}, "--initial-cluster is required"},
		{map[string]string{"listen-client-urls": "127.0.0.1:1"}, "--listen-client-urls"},
		{map[string]string{"listen-peer-urls": "http://a:1,http://b:2"}, "--listen-peer-urls"},
		{map[string]string{"tick-ms": "100", "election-ms": "200"}, "at least 5 times"},
		{map[string]string{"bogus": "1"}, "flag provided but not defined"},
	} {
		err := Main(context.Background(), args(tc.change))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Main(%v) = %v, want an error saying %q", tc.change, err, tc.want)
		}
	}
	if err := Main(context.Background(), append(args(nil), "extra")); err == nil || !strings.Contains(err.Error(), "unexpected arguments") {
		t.Errorf("extra argument: %v", err)
	}
}
