package ssh

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/locktest/locktest/clusters/backend"
)

// placed makes the cluster of backend with nodes nodes over hosts hosts
// (h1.. at 10.0.0.1..), optionally listing the backend's hosts as
// backendHosts, without connecting: New only places the nodes.
func placed(t *testing.T, backend string, nodes, hosts int, backendHosts []string, params map[string]string) *Hosts {
	t.Helper()
	inv := &Inventory{Source: "test.yaml", Workdir: DefaultWorkdir}
	var conns []*Conn
	for i := range hosts {
		h := Host{Name: fmt.Sprintf("h%d", i+1), Address: fmt.Sprintf("10.0.0.%d", i+1), Workdir: "/w"}
		inv.Hosts = append(inv.Hosts, h)
		conns = append(conns, &Conn{Host: h})
	}
	if backendHosts != nil {
		inv.Backends = map[string][]string{backend: backendHosts}
	}
	cl, err := New(Options{Backend: backend, Nodes: nodes, Conns: conns, Inventory: inv, RunID: "r1", Params: params})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// layout renders where each node of cl runs: "n1 h1 10.0.0.1:6379".
func layout(cl *Hosts) string {
	var out []string
	for i, n := range cl.Nodes() {
		out = append(out, fmt.Sprintf("%s %s %s", n.Name, cl.nodes[i].conn.Host.Name, n.Addr))
	}
	return strings.Join(out, ", ")
}

// TestPlacement: nodes go to the backend's hosts in turn; a host with one
// node of a kind gives it the kind's first port, and a node that shares
// its host with another of its kind gets the next port; a redis-sentinel's
// sentinels follow its data nodes; an inventory may name a host twice to
// put two nodes there.
func TestPlacement(t *testing.T) {
	for _, tc := range []struct {
		name, backend string
		nodes, hosts  int
		backendHosts  []string
		want          string
	}{
		{"one a host", "redis", 3, 5, nil,
			"n1 h1 10.0.0.1:6379, n2 h2 10.0.0.2:6379, n3 h3 10.0.0.3:6379"},
		{"more nodes than hosts", "redis", 5, 2, nil,
			"n1 h1 10.0.0.1:6379, n2 h2 10.0.0.2:6379, n3 h1 10.0.0.1:6380, n4 h2 10.0.0.2:6380, n5 h1 10.0.0.1:6381"},
		{"sentinel on five hosts", "redis-sentinel", 3, 5, nil,
			"n1 h1 10.0.0.1:6379, n2 h2 10.0.0.2:6379, n3 h3 10.0.0.3:6379, s1 h4 10.0.0.4:26379, s2 h5 10.0.0.5:26379, s3 h1 10.0.0.1:26379"},
		{"sentinels sharing a host", "redis-sentinel", 3, 5, []string{"h1", "h2", "h3", "h4", "h5", "h4"},
			"n1 h1 10.0.0.1:6379, n2 h2 10.0.0.2:6379, n3 h3 10.0.0.3:6379, s1 h4 10.0.0.4:26379, s2 h5 10.0.0.5:26379, s3 h4 10.0.0.4:26380"},
		{"redis cluster on five hosts", "redis-cluster", 6, 5, nil,
			"n1 h1 10.0.0.1:6379, n2 h2 10.0.0.2:6379, n3 h3 10.0.0.3:6379, n4 h4 10.0.0.4:6379, n5 h5 10.0.0.5:6379, n6 h1 10.0.0.1:6380"},
		{"etcd on two hosts", "etcd", 3, 2, nil,
			"n1 h1 10.0.0.1:2379, n2 h2 10.0.0.2:2379, n3 h1 10.0.0.1:2381"},
		{"zookeeper on one host", "zookeeper", 3, 1, nil,
			"n1 h1 10.0.0.1:2181, n2 h1 10.0.0.1:2182, n3 h1 10.0.0.1:2183"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := placed(t, tc.backend, tc.nodes, tc.hosts, tc.backendHosts, nil)
			if got := layout(cl); got != tc.want {
				t.Errorf("placed\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
	cl := placed(t, "etcd", 3, 2, nil, nil)
	argv := strings.Join(launchOf(t, cl, 2).Argv, " ")
	for _, w := range []string{"--listen-peer-urls http://10.0.0.1:2382", "n1=http://10.0.0.1:2380,n2=http://10.0.0.2:2380,n3=http://10.0.0.1:2382"} {
		if !strings.Contains(argv, w) {
			t.Errorf("n3's command line lacks %q (n1's peer port is 2380): %s", w, argv)
		}
	}
}

// launchOf returns the launch of cl's i-th node, as it starts there.
func launchOf(t *testing.T, cl *Hosts, i int) backend.Launch {
	t.Helper()
	n := cl.nodes[i]
	l, err := kindOf(n).Launch(cl.placement(n, kindOf(n)))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// redisConf returns the redis.conf cl's i-th node starts with.
func redisConf(t *testing.T, cl *Hosts, i int) string {
	t.Helper()
	for _, f := range launchOf(t, cl, i).Files {
		if strings.HasSuffix(f.Path, "/redis.conf") {
			return f.Data
		}
	}
	t.Fatalf("%s has no redis.conf", cl.nodes[i].name)
	return ""
}

// TestReplicatedConfigs: a redis-sentinel's replicas replicate n1 and its
// sentinels watch n1, each announcing its own host address and port; a
// redis-cluster's nodes announce their host's address; the backend params
// reach the configs.
func TestReplicatedConfigs(t *testing.T) {
	cl := placed(t, "redis-sentinel", 3, 5, nil, map[string]string{"down-after": "300ms"})
	for i, want := range []string{
		"port 6379\n.*replica-announce-ip 10.0.0.1\nreplica-announce-port 6379\n",
		"replicaof 10.0.0.1 6379\nreplica-announce-ip 10.0.0.2\n",
		"", "", "",
		"port 26379\n.*sentinel monitor locktest 10.0.0.1 6379 2\nsentinel down-after-milliseconds locktest 300\n.*sentinel announce-ip 10.0.0.1\nsentinel announce-port 26379\n",
	} {
		conf := redisConf(t, cl, i)
		for _, w := range strings.Split(want, ".*") {
			if !strings.Contains(conf, w) {
				t.Errorf("%s's redis.conf lacks %q:\n%s", cl.nodes[i].name, w, conf)
			}
		}
	}
	if conf := redisConf(t, cl, 0); strings.Contains(conf, "replicaof") {
		t.Errorf("n1, the first master, replicates:\n%s", conf)
	}
	rc := placed(t, "redis-cluster", 6, 5, nil, map[string]string{"node-timeout": "5s"})
	conf := redisConf(t, rc, 5)
	for _, w := range []string{"port 6380\n", "cluster-enabled yes\n", "cluster-node-timeout 5000\n", "cluster-announce-ip 10.0.0.1\n"} {
		if !strings.Contains(conf, w) {
			t.Errorf("n6's redis.conf lacks %q:\n%s", w, conf)
		}
	}
}

// TestBadReplicatedSettings: nodes and params that a replicated Redis
// cannot run are one-line errors.
func TestBadReplicatedSettings(t *testing.T) {
	inv := &Inventory{Source: "test.yaml", Hosts: []Host{{Name: "h1", Address: "10.0.0.1"}}}
	conns := []*Conn{{Host: inv.Hosts[0]}}
	for _, tc := range []struct {
		backend string
		nodes   int
		params  map[string]string
		want    string
	}{
		{"redis-cluster", 5, nil, "5 nodes: want an even number, at least 6"},
		{"redis-sentinel", 4, nil, "Replicas must be 1 or 2, not 3"},
		{"redis-sentinel", 3, map[string]string{"down-after": "soon"}, `down-after="soon": not a positive duration`},
		{"redis-sentinel", 3, map[string]string{"node-timeout": "1s"}, `redis-sentinel: unknown cluster param "node-timeout" (known: replicas, down-after, failover-timeout)`},
		{"redis", 3, map[string]string{"tick-ms": "10"}, `redis: unknown cluster param "tick-ms" (redis has none)`},
	} {
		_, err := New(Options{Backend: tc.backend, Nodes: tc.nodes, Conns: conns, Inventory: inv, RunID: "r1", Params: tc.params})
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s with %d nodes and %v: %v, want one line with %q", tc.backend, tc.nodes, tc.params, err, tc.want)
		}
	}
}

// TestCutsOfSharedHosts: a cut that host-address rules cannot make
// exactly is an error naming the nodes and the host, and makes no rule;
// the same cut of nodes with hosts of their own, or with the host's
// nodes all on one side, has its rules.
func TestCutsOfSharedHosts(t *testing.T) {
	// n1..n5 on h1..h5, n6 on h1.
	cl := placed(t, "redis-cluster", 6, 5, nil, nil)
	nw := cl.Network(nil, nil, "no client addresses")
	for _, tc := range []struct {
		a, b []string
		want string // "" for rules
	}{
		{[]string{"n1"}, []string{"n6"}, "cannot cut n1 from n6: both run on host h1"},
		{[]string{"n1"}, []string{"n2", "n3", "n4", "n5", "n6"}, "cannot cut n1 from n6: both run on host h1"},
		{[]string{"n1"}, []string{"n2", "n3"}, "host h1 also runs n6, which is on neither side"},
		{[]string{"n2"}, []string{"n1", "n3", "n4", "n5", "n6"}, ""},
		{[]string{"n1", "n6"}, []string{"n2", "n3"}, ""},
	} {
		rules, err := nw.cutRules(tc.a, tc.b)
		switch {
		case tc.want == "" && (err != nil || len(rules) == 0):
			t.Errorf("cut %v|%v: %v, %d hosts with rules; want rules", tc.a, tc.b, err, len(rules))
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n")):
			t.Errorf("cut %v|%v: %v, want one line with %q", tc.a, tc.b, err, tc.want)
		case tc.want != "" && rules != nil:
			t.Errorf("cut %v|%v: rules %v with the error", tc.a, tc.b, rules)
		}
	}
	if err := nw.Loss(t.Context(), []string{"n1"}, 0.5); err == nil || !strings.Contains(err.Error(), "host h1 also runs n6") {
		t.Errorf("loss on n1 alone: %v, want an error naming n6 on h1", err)
	}
}

// TestOnEachRunsTheHostsAtOnce: a fault's commands go to every host
// together, not one after another (a partition made host by host would
// stand half-made for as long as the slow hosts take: 19 s under
// stress-ng in the ssh lab), and their errors come back in host order.
func TestOnEachRunsTheHostsAtOnce(t *testing.T) {
	conns := []*Conn{{Host: Host{Name: "h1"}}, {Host: Host{Name: "h2"}}, {Host: Host{Name: "h3"}}}
	var mu sync.Mutex
	in, most := 0, 0
	release := make(chan struct{})
	go func() {
		// Let them all in before any leaves: with one at a time, the
		// second would never come in and this would time out.
		for {
			mu.Lock()
			n := in
			mu.Unlock()
			if n == len(conns) {
				close(release)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	err := onEach(conns, func(c *Conn) error {
		mu.Lock()
		in++
		most = max(most, in)
		mu.Unlock()
		select {
		case <-release:
		case <-time.After(10 * time.Second):
		}
		if c.Host.Name != "h2" {
			return fmt.Errorf("%s failed", c.Host.Name)
		}
		return nil
	})
	if most != len(conns) {
		t.Errorf("at most %d hosts at once, want all %d", most, len(conns))
	}
	if err == nil || err.Error() != "h1 failed\nh3 failed" {
		t.Errorf("errors %q, want h1's then h3's", err)
	}
}
