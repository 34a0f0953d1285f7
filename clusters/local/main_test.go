package local

import (
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/locktest/locktest/testkit/testexe"
)

// nodeEnv makes the test binary double as locktest's own node programs:
// with LOCKTEST_TEST_NODE=etcd it runs one etcd member (testexe), with
// spawn-as-nobody the driver of TestCredSpawnDiesWithItsDriver.
const nodeEnv = testexe.NodeEnv

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
	testexe.ServeIfAsked()
	os.Exit(m.Run())
}
