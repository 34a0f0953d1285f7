package docker

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/testkit/backendtable"
)

// Every backend runs on the docker provider, with the checks every
// provider passes (backendtable.Run): its layout, readiness, roles and
// targets, a pause, a kill and a restart, and a stop that leaves nothing
// behind (newLab's check). A backend missing here is a failure, not a gap
// in a doc.
func TestEveryBackendRunsOnDocker(t *testing.T) {
	backendtable.Run(t, backend.All(), func(t *testing.T, b string) clusters.Cluster {
		return startCluster(t, b, 0)
	})
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
