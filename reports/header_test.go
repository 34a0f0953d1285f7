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
