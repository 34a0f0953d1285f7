package natsnode

import (
	"context"
	"strings"
	"testing"
	"time"
)

// Bad command lines are refused with an error naming the flag, before any
// server starts.
func TestMainRejectsBadFlags(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--store-dir", dir, "--listen", "127.0.0.1:1"}, "--name is required"},
		{[]string{"--name", "n1", "--listen", "127.0.0.1:1"}, "--store-dir is required"},
		{[]string{"--name", "n1", "--store-dir", dir}, "--listen is required"},
		{[]string{"--name", "n1", "--store-dir", dir, "--listen", "127.0.0.1"}, `--listen "127.0.0.1" must be host:port`},
		{[]string{"--name", "n1", "--store-dir", dir, "--listen", "127.0.0.1:1", "--sync", "often"}, `--sync "often" must be always or a positive duration`},
		{[]string{"--name", "n1", "--store-dir", dir, "--listen", "127.0.0.1:1", "--routes", "127.0.0.1:2"}, "--routes needs --cluster-listen"},
		{[]string{"--name", "n1", "--store-dir", dir, "--listen", "127.0.0.1:1", "--cluster-listen", "127.0.0.1:2", "--routes", "h:x"}, `--routes "h:x" must be host:port`},
		{[]string{"--name", "n1", "--store-dir", dir, "--listen", "127.0.0.1:1", "--monitor", ":0"}, `--monitor ":0" must be host:port`},
		{[]string{"--bogus", "1"}, "flag provided but not defined"},
		{[]string{"--name", "n1", "--store-dir", dir, "--listen", "127.0.0.1:1", "extra"}, "unexpected arguments"},
	} {
		err := Main(context.Background(), tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Main(%q) = %v, want an error saying %q", tc.args, err, tc.want)
		}
	}
}

// Options gives the embedded server what the flags say: its name, store,
// client address and the address it announces, JetStream's sync, and, in a
// cluster, the route mesh of the other servers.
func TestOptions(t *testing.T) {
	o, err := Options("n2", "/d", "0.0.0.0:4222", "10.0.0.2", "0.0.0.0:6222", "10.0.0.1:6222, 10.0.0.3:6222", "always")
	if err != nil {
		t.Fatal(err)
	}
	if o.ServerName != "n2" || o.StoreDir != "/d" || !o.JetStream || o.Host != "0.0.0.0" || o.Port != 4222 || o.ClientAdvertise != "10.0.0.2:4222" {
		t.Errorf("server options %+v", o)
	}
	if !o.SyncAlways || o.SyncInterval != 0 {
		t.Errorf("sync always: SyncAlways %v, SyncInterval %v", o.SyncAlways, o.SyncInterval)
	}
	if o.Cluster.Name != ClusterName || o.Cluster.Host != "0.0.0.0" || o.Cluster.Port != 6222 || o.Cluster.Advertise != "10.0.0.2:6222" {
		t.Errorf("cluster options %+v", o.Cluster)
	}
	var routes []string
	for _, r := range o.Routes {
		routes = append(routes, r.String())
	}
	if got := strings.Join(routes, ","); got != "nats://10.0.0.1:6222,nats://10.0.0.3:6222" {
		t.Errorf("routes %s", got)
	}
	o, err = Options("n1", "/d", "127.0.0.1:4222", "", "", "", "5s")
	if err != nil {
		t.Fatal(err)
	}
	if o.SyncAlways || o.SyncInterval != 5*time.Second || o.ClientAdvertise != "127.0.0.1:4222" || o.Cluster.Port != 0 || len(o.Routes) != 0 {
		t.Errorf("a server of its own, syncing every 5s: %+v", o)
	}
	o, err = Options("n1", "/d", "127.0.0.1:4222", "", "", "", "")
	if err != nil || o.SyncAlways || o.SyncInterval != 0 {
		t.Errorf("the default sync: SyncAlways %v, SyncInterval %v (%v); want the server's own default", o.SyncAlways, o.SyncInterval, err)
	}
}
