package reports

import (
	"strings"
	"testing"

	"github.com/locktest/locktest/runstore"
)

// TestClusterTextSaysWhatRanTheNodes checks the cluster cell of a report's
// header for each provider: local processes, or docker containers and their
// image, also for results stored before they named their provider.
func TestClusterTextSaysWhatRanTheNodes(t *testing.T) {
	const dockerNet = "docker network locktest-ab12 10.78.3.0/24"
	tests := []struct {
		name string
		run  runstore.RunInfo
		want string
	}{
		{"local", runstore.RunInfo{Nodes: 3, Backend: "zookeeper", Provider: "local", Network: "loopback"}, "3 × zookeeper (local processes)"},
		{"local, stored before the provider was", runstore.RunInfo{Nodes: 1, Backend: "redis", Network: "netns 10.77.1.0/24"}, "1 × redis (local processes)"},
		{"docker", runstore.RunInfo{Nodes: 3, Backend: "zookeeper", Provider: "docker", Image: "locktest/zookeeper:host", Network: dockerNet},
			"3 × zookeeper (docker containers, image locktest/zookeeper:host)"},
		{"docker, image named by the network", runstore.RunInfo{Nodes: 5, Backend: "redis", Provider: "docker", Image: "redis:7.2", Network: dockerNet + ", image redis:7.2"},
			"5 × redis (docker containers)"},
		{"ssh", runstore.RunInfo{Nodes: 5, Backend: "redis", Provider: "ssh", Network: "ssh hosts h1 10.0.0.1 rtt 210µs, h2 10.0.0.2 rtt 190µs"},
			"5 × redis (processes on SSH hosts)"},
		{"docker, stored before the provider was", runstore.RunInfo{Nodes: 3, Backend: "etcd", Network: dockerNet + ", image locktest/etcd:1f2e"},
			"3 × etcd (docker containers)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ClusterText(tt.run); got != tt.want {
				t.Errorf("ClusterText = %q, want %q", got, tt.want)
			}
			page, err := RenderHTML(runstore.Results{Run: tt.run, Valid: "true"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			cell := "<th>cluster</th><td>" + tt.want + ", network: " + tt.run.Network
			if !strings.Contains(string(page), cell) {
				t.Errorf("the report's header lacks %q", cell)
			}
			if tt.run.Provider == "docker" || strings.HasPrefix(tt.run.Network, "docker") {
				if strings.Contains(string(page), "local processes") {
					t.Errorf("the report of a docker run says local processes")
				}
			}
		})
	}
}

// TestHeaderShowsVersions: the report's header has one row with what the
// run ran, servers, client libraries and locktest, escaped; a run stored
// before runs recorded versions says so.
func TestHeaderShowsVersions(t *testing.T) {
	for _, tt := range []struct {
		name string
		v    runstore.Versions
		want string
	}{
		{"a Go impl", runstore.Versions{Locktest: "v0.4.0 1f2e3d4", Servers: map[string]string{"redis": "7.0.15"},
			Clients: map[string]string{"github.com/redis/go-redis/v9": "v9.23.0", "github.com/go-redsync/redsync/v4": "v4.18.1"}},
			"redis 7.0.15; github.com/go-redsync/redsync/v4 v4.18.1, github.com/redis/go-redis/v9 v9.23.0; locktest v0.4.0 1f2e3d4"},
		{"a mixed cluster, one node unknown", runstore.Versions{Locktest: "(devel)",
			Servers: map[string]string{"redis": "7.0.15, 7.2.4; unknown on n3: dial tcp 127.0.0.1:7003: connect: connection refused", "redis-sentinel": "7.0.15"},
			Clients: map[string]string{"redis-py": "5.0.1 <rc>"}},
			"redis 7.0.15, 7.2.4; unknown on n3: dial tcp 127.0.0.1:7003: connect: connection refused, redis-sentinel 7.0.15; redis-py 5.0.1 &lt;rc&gt;; locktest (devel)"},
		{"stored before versions were", runstore.Versions{}, "not recorded (the run was stored before locktest recorded versions)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			page, err := RenderHTML(runstore.Results{Run: runstore.RunInfo{Nodes: 1, Backend: "redis", Versions: tt.v}, Valid: "true"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if row := `<tr><th>versions</th><td colspan="3">` + tt.want + "</td></tr>"; !strings.Contains(string(page), row) {
				t.Errorf("the report's header lacks %q", row)
			}
		})
	}
}
