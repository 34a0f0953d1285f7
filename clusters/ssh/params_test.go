package ssh

import (
	"strings"
	"testing"
)

// CheckParams takes the settings each backend reads on this provider,
// checked as the backend's definition checks them, and refuses any other
// with a one-line error that names it.
func TestCheckParams(t *testing.T) {
	for _, tc := range []struct {
		backend string
		params  map[string]string
		err     string // a part of the error; "" for none
	}{
		{"redis", nil, ""},
		{"etcd", map[string]string{"tick-ms": "50", "election-ms": "500"}, ""},
		{"etcd", map[string]string{"tick-ms": "100"}, "at least 5 heartbeats"},
		{"etcd", map[string]string{"node-timeout": "1s"}, `etcd: unknown cluster param "node-timeout" (known: tick-ms, election-ms)`},
		{"redis-cluster", map[string]string{"node-timeout": "2s"}, ""},
		{"redis-sentinel", map[string]string{"down-after": "2s"}, ""},
		{"zookeeper", map[string]string{"tick-time": "100ms"}, ""},
		{"zookeeper", map[string]string{"ticktime": "100ms"}, `zookeeper: unknown cluster param "ticktime" (known: tick-time)`},
		{"mysql", map[string]string{"replicas": "1"}, `mysql: unknown cluster param "replicas" (mysql has none)`},
	} {
		err := CheckParams(tc.backend, tc.params)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("CheckParams(%s, %v) = %v", tc.backend, tc.params, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("CheckParams(%s, %v) = %v; want an error saying %q", tc.backend, tc.params, err, tc.err)
		}
	}
}
