// Package testexe lets a test binary double as locktest's own programs —
// the worker a run starts per client, and the servers of the node program
// (clusters/nodeprog: etcd, NATS) — so that
// integration tests run real separate processes without building the
// locktest binary first. A package's TestMain calls Main; its run configs
// take their commands from Worker and Node.
package testexe

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/locktest/locktest/clusters/clientaddr"
	"github.com/locktest/locktest/clusters/nodeprog"
	"github.com/locktest/locktest/impls/external"
	"github.com/locktest/locktest/testkit/bareloop"
	"github.com/locktest/locktest/workloads"
)

const (
	// WorkerEnv=1 makes the test binary run one worker.
	WorkerEnv = "LOCKTEST_TEST_WORKER"
	// BareEnv, set to a bareloop.Config in JSON, makes the test binary
	// run the bare reference loop and print its bareloop.Result.
	BareEnv = "LOCKTEST_TEST_BARE"
	// NodeEnv=1 makes the test binary run one server of locktest's node
	// program (clusters/nodeprog) from the arguments "node <kind> ...".
	NodeEnv = "LOCKTEST_TEST_NODE"
)

// Main runs one worker or one embedded server when the environment asks for
// it, else the tests, and then each of after (an error of one fails the
// test binary); it exits with the tests' code and does not return.
func Main(m *testing.M, after ...func() error) {
	ServeIfAsked()
	code := m.Run()
	for _, f := range after {
		if err := f(); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: after the tests: %v\n", err)
			code = 1
		}
	}
	// Every run closes its client addresses (clusters/clientaddr); one
	// this process still owns was left behind.
	if ids := clientaddr.Owned(os.Getpid()); len(ids) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: the tests left the client addresses of runs %v on this host\n", ids)
		code = 1
	}
	os.Exit(code)
}

// ServeIfAsked runs one worker, one embedded server or the reference client
// adapter (arguments "goref IMPL"), and exits, when the environment or the
// arguments ask for it; else it returns at once.
func ServeIfAsked() {
	switch {
	case len(os.Args) == 3 && os.Args[1] == "goref":
		// Before the worker: a client program inherits its worker's
		// environment.
		if err := external.Serve(context.Background(), os.Stdin, os.Stdout, os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "goref:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case os.Getenv(BareEnv) != "":
		var cfg bareloop.Config
		if err := json.Unmarshal([]byte(os.Getenv(BareEnv)), &cfg); err != nil {
			fmt.Fprintln(os.Stderr, "bare loop:", err)
			os.Exit(2)
		}
		res, err := bareloop.Run(context.Background(), cfg)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bare loop:", err)
			os.Exit(1)
		}
		_ = json.NewEncoder(os.Stdout).Encode(res)
		os.Exit(0)
	case os.Getenv(WorkerEnv) == "1":
		if err := workloads.RunWorker(context.Background(), os.Stdin, os.Stdout); err != nil {
			os.Exit(2)
		}
		os.Exit(0)
	case os.Getenv(NodeEnv) == "1":
		if len(os.Args) < 3 || os.Args[1] != "node" {
			fmt.Fprintf(os.Stderr, "test node: want arguments `node <%s> ...`, got %q\n", strings.Join(nodeprog.Names(), "|"), os.Args[1:])
			os.Exit(2)
		}
		if err := nodeprog.Run(context.Background(), os.Args[2], os.Args[3:]); err != nil {
			fmt.Fprintln(os.Stderr, "locktest:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// GoRef returns the command that runs this test binary as the reference
// client adapter around the Go impl named impl (clients/goref): a
// run.Config.Client. The test binary must register impl.
func GoRef(impl string) string { return os.Args[0] + " goref " + impl }

// Worker returns the command and environment that run this test binary as
// a worker (run.Config.WorkerCommand and WorkerEnv).
func Worker() (cmd, env []string) { return []string{os.Args[0]}, []string{WorkerEnv + "=1"} }

// Node returns the command and environment that run this test binary as
// locktest's node programs (run.Config.NodeCommand and NodeEnv).
func Node() (cmd, env []string) { return []string{os.Args[0]}, []string{NodeEnv + "=1"} }
