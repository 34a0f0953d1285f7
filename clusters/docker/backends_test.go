package docker

import (
	"fmt"
	"net"

	"context"
	"github.com/jackc/pgx/v5"
	"slices"
	"testing"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/backend"
)

// Every backend runs on the docker provider: its cluster starts (each
// node ready by its backend's own probe, the cluster ready as a whole),
// has the layout's nodes, answers for each node a role the backend says
// it can have, pauses and resumes a node, restarts a killed node, and
// stops leaving nothing behind (newLab's check). A
// backend missing here is a failure, not a gap in a doc.
func TestEveryBackendRunsOnDocker(t *testing.T) {
	for _, b := range backend.All() {
		t.Run(b, func(t *testing.T) {
			if !slices.Contains(Backends(), b) {
				t.Fatalf("the docker provider does not run %s", b)
			}
			c := startCluster(t, b, 0)
			layout, err := backend.NewLayout(b, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			nodes := c.Nodes()
			if len(nodes) != len(layout.Nodes) {
				t.Fatalf("%d nodes, want the layout's %d", len(nodes), len(layout.Nodes))
			}
			for i, n := range nodes {
				if n.Name != layout.Nodes[i].Name || n.Addr == "" {
					t.Errorf("node %d = %+v, want %s with an address", i, n, layout.Nodes[i].Name)
				}
				if pid := c.Pids()[n.Name]; pid == 0 {
					t.Errorf("%s: no running process", n.Name)
				}
				roles := c.Roles(n)
				if len(roles) == 0 {
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				var role string
				// A role can be unreadable for a moment after the start
				// (ZooKeeper's followers sync with the leader).
				for {
					role, err = c.Role(ctx, n)
					if err == nil || ctx.Err() != nil {
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
				cancel()
				if err != nil || !slices.Contains(roles, role) {
					t.Errorf("%s: role %q, %v; want one of %v", n.Name, role, err, roles)
				}
			}
			// A target paused does not answer its own readiness query
			// (every process of the server stopped), and answers again
			// once resumed.
			target := c.Targets()[0]
			tn, err := c.find(target)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Pause(context.Background(), target); err != nil {
				t.Fatalf("pause %s: %v", target.Name, err)
			}
			pctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
			err = kinds[tn.kind].probe(pctx, c, tn)
			cancel()
			if err == nil {
				t.Errorf("%s answered while paused", target.Name)
			}
			if err := c.Resume(context.Background(), target); err != nil {
				t.Fatalf("resume %s: %v", target.Name, err)
			}
			rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err = kinds[tn.kind].probe(rctx, c, tn)
			cancel()
			if err != nil {
				t.Errorf("%s does not answer after its resume: %v", target.Name, err)
			}
			// A target killed comes back on its data, ready.
			if err := c.Kill(context.Background(), target); err != nil {
				t.Fatalf("kill %s: %v", target.Name, err)
			}
			if pid := c.Pids()[target.Name]; pid != 0 {
				t.Errorf("%s still runs after Kill (pid %d)", target.Name, pid)
			}
			if err := c.Restart(context.Background(), target); err != nil {
				t.Fatalf("restart %s: %v", target.Name, err)
			}
			if err := c.Stop(context.Background()); err != nil {
				t.Errorf("stop: %v", err)
			}
			if pids := c.Pids(); slices.ContainsFunc(nodes, func(n clusters.Node) bool { return pids[n.Name] != 0 }) {
				t.Errorf("a node still runs after Stop: %v", pids)
			}
		})
	}
}

// A paused PostgreSQL serves no query, not even on a connection opened
// before the pause, whose backend process is not the container's main
// process: the whole container freezes.
func TestDockerPausesEveryProcessOfPostgres(t *testing.T) {
	c := startCluster(t, backend.Postgres, 0)
	n := c.Nodes()[0]
	host, port, _ := net.SplitHostPort(n.Addr)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, fmt.Sprintf("host=%s port=%s user=%s dbname=%s sslmode=disable connect_timeout=2", host, port, backend.PostgresUser, backend.PostgresUser))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Fatal(err)
	}
	if err := c.Pause(ctx, n); err != nil {
		t.Fatal(err)
	}
	qctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	err = conn.QueryRow(qctx, "SELECT 1").Scan(&one)
	cancel()
	if err == nil {
		t.Errorf("a connection opened before the pause was served while paused")
	}
	if err := c.Resume(ctx, n); err != nil {
		t.Fatal(err)
	}
}
