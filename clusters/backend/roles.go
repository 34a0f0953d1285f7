// How a node of a lock service says what it is to its peers now (etcd's
// leader or a follower, ZooKeeper's leader, follower or standalone), asked
// over its client port. Every provider answers the nemesis's role pins
// with it, so that a fault pinned to "leader" hits the node that leads
// when the fault goes in.

package backend

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdTimeout bounds one member's answer to EtcdRole when the caller's
// context has no earlier deadline.
const etcdTimeout = time.Second

// EtcdRole asks the etcd member at addr for its status (the Maintenance
// API's Status) and returns "leader" when the leader it knows is itself
// and "follower" when it knows another member as leader. A member that
// knows no leader (an election is under way), reports errors or does not
// answer within a second is an error.
func EtcdRole(ctx context.Context, addr string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, etcdTimeout)
	defer cancel()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: etcdTimeout, Logger: zap.NewNop()})
	if err != nil {
		return "", fmt.Errorf("etcd %s: %w", addr, err)
	}
	defer c.Close()
	st, err := c.Status(ctx, addr)
	switch {
	case err != nil:
		return "", fmt.Errorf("etcd %s: status: %w", addr, err)
	case len(st.Errors) > 0:
		return "", fmt.Errorf("etcd %s reports %s", addr, strings.Join(st.Errors, "; "))
	case st.Leader == 0:
		return "", fmt.Errorf("etcd %s knows no leader", addr)
	case st.Header != nil && st.Leader == st.Header.MemberId:
		return EtcdLeader, nil
	}
	return EtcdFollower, nil
}

// ZooKeeperRole sends the `srvr` four-letter command to addr and returns the
// "Mode:" it reports: leader, follower or standalone. A peer that is not in
// a quorum answers that it is not serving requests, which is an error.
func ZooKeeperRole(ctx context.Context, addr string) (string, error) {
	d := net.Dialer{Timeout: 500 * time.Millisecond}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	dl := time.Now().Add(time.Second)
	if t, ok := ctx.Deadline(); ok && t.Before(dl) {
		dl = t
	}
	conn.SetDeadline(dl)
	if _, err := io.WriteString(conn, "srvr"); err != nil {
		return "", err
	}
	b, err := io.ReadAll(io.LimitReader(conn, 64*1024))
	if err != nil && len(b) == 0 {
		return "", err
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		if m, ok := strings.CutPrefix(sc.Text(), "Mode: "); ok {
			return strings.TrimSpace(m), nil
		}
	}
	reply := strings.TrimSpace(string(b))
	if reply == "" {
		reply = "an empty reply"
	}
	return "", fmt.Errorf("srvr: %q", firstLine(reply))
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return strings.TrimRight(line, "\r")
}
