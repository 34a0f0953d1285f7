package backend

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/locktest/locktest/clusters"
)

// The sync param is the server's default, always, or a positive duration,
// and reads back as the node program's --sync takes it.
func TestParseNatsSync(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		err      bool
	}{
		{"", "", false},
		{"always", "always", false},
		{" 5s ", "5s", false},
		{"100ms", "100ms", false},
		{"0s", "", true},
		{"-1s", "", true},
		{"never", "", true},
	} {
		s, err := ParseNatsSync(tc.in)
		if (err != nil) != tc.err || (err == nil && s.String() != tc.want) {
			t.Errorf("ParseNatsSync(%q) = %q, %v; want %q (error %v)", tc.in, s, err, tc.want, tc.err)
		}
		if err != nil && !strings.Contains(err.Error(), "cluster param sync=") {
			t.Errorf("ParseNatsSync(%q): error %q does not name the param", tc.in, err)
		}
	}
}

// A NATS cluster has 1 to 5 servers, one replica of the lock bucket on
// each, and refuses a bad sync param in one line.
func TestNatsLayout(t *testing.T) {
	l, err := NewLayout(Nats, 0, nil)
	if err != nil || len(l.Nodes) != 3 {
		t.Fatalf("default layout %+v, %v; want 3 servers", l, err)
	}
	if got := l.Roles("n1"); strings.Join(got, ",") != "leader,meta-leader,follower" {
		t.Errorf("roles %v", got)
	}
	if one, err := NewLayout(Nats, 1, nil); err != nil || one.HasRoles() {
		t.Errorf("a server of its own: %+v, %v; want no roles", one, err)
	}
	if _, err := NewLayout(Nats, 5, nil); err != nil {
		t.Errorf("5 servers: %v", err)
	}
	for _, tc := range []struct {
		nodes  int
		params map[string]string
		want   string
	}{
		{6, nil, "nats: 6 nodes: a JetStream stream has at most 5 replicas"},
		{3, map[string]string{NatsParamSync: "sometimes"}, `nats: cluster param sync="sometimes" must be always or a positive duration`},
		{3, map[string]string{"fsync": "always"}, `nats: unknown cluster param "fsync" (known: sync)`},
	} {
		if _, err := NewLayout(Nats, tc.nodes, tc.params); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("NewLayout(nats, %d, %v) = %v, want %q", tc.nodes, tc.params, err, tc.want)
		}
	}
}

// The bucket's stream is replicated when it has a leader and every other
// server's replica is current and online; a single server's needs none.
func TestNatsReplicated(t *testing.T) {
	peer := func(name string, current, offline bool) *jetstream.PeerInfo {
		return &jetstream.PeerInfo{Name: name, Current: current, Offline: offline, Active: time.Millisecond}
	}
	for _, tc := range []struct {
		name     string
		cluster  *jetstream.ClusterInfo
		replicas int
		want     string
	}{
		{"one server", nil, 1, ""},
		{"no cluster info", nil, 3, "no leader yet"},
		{"no leader", &jetstream.ClusterInfo{Replicas: []*jetstream.PeerInfo{peer("n2", true, false)}}, 3, "no leader yet"},
		{"all current", &jetstream.ClusterInfo{Leader: "n1", Replicas: []*jetstream.PeerInfo{peer("n2", true, false), peer("n3", true, false)}}, 3, ""},
		{"one behind", &jetstream.ClusterInfo{Leader: "n1", Replicas: []*jetstream.PeerInfo{peer("n2", true, false), peer("n3", false, false)}}, 3, "1 of 2 followers current"},
		{"one offline", &jetstream.ClusterInfo{Leader: "n1", Replicas: []*jetstream.PeerInfo{peer("n2", true, false), peer("n3", true, true)}}, 3, "1 of 2 followers current"},
	} {
		err := natsReplicated(&jetstream.StreamInfo{Cluster: tc.cluster}, tc.replicas)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// The role query reads a server's monitoring endpoint NatsHTTPOffset
// above its client port, whatever port the provider gave it.
func TestNatsHTTPAddr(t *testing.T) {
	nodes := []clusters.Node{{Name: "n1", Addr: "10.0.0.1:4222"}, {Name: "n2", Addr: "127.0.0.1:40427"}}
	for name, want := range map[string]string{"n1": "10.0.0.1:8222", "n2": "127.0.0.1:44427", "n3": ""} {
		if got := natsHTTPAddr(nodes, name); got != want {
			t.Errorf("natsHTTPAddr(%s) = %q, want %q", name, got, want)
		}
	}
}
