package local

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/locktest/locktest/clusters/local/etcdnode"
)

// nodeEnv makes the test binary double as locktest's own node programs: with
// LOCKTEST_TEST_NODE=etcd it runs one etcd member (the arguments after
// "node etcd") instead of the tests.
const nodeEnv = "LOCKTEST_TEST_NODE"

func TestMain(m *testing.M) {
	if os.Getenv(nodeEnv) == "spawn-as-nobody" {
		// A driver that starts a program under another user and waits to
		// be killed (TestCredSpawnDiesWithItsDriver).
		p, _, err := spawnWith(spawnSpec{Bin: "sleep", Args: []string{"120"}, Dir: "/", LogPath: os.DevNull,
			Cred: &syscall.Credential{Uid: 65534, Gid: 65534}})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Println(p.pid)
		select {}
	}
	if os.Getenv(nodeEnv) == "etcd" {
		args := os.Args[1:]
		if len(args) < 2 || args[0] != "node" || args[1] != "etcd" {
			fmt.Fprintf(os.Stderr, "test node: want arguments `node etcd ...`, got %q\n", args)
			os.Exit(2)
		}
		if err := etcdnode.Main(context.Background(), args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "locktest:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
