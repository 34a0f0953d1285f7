// Command locktest-worker runs one lock client, driven over stdin and
// stdout by a run's driver, exactly as `locktest worker` does: it is the
// worker alone, without the rest of the command, for a build that must
// stay small. A run whose fault needs a worker whose Go runtime clock can
// run at a rate (clusters/clockrate) builds this program over the patched
// runtime (run/clockrate.go) with impls.go swapped, in that build only,
// for a file that imports the package of the run's impl alone: the patched
// build compiles the worker, its impl family and the standard library
// again, not every package of locktest. Built as it is here, it serves
// every impl (impls/all).
//
// It takes no arguments. SIGINT or SIGTERM stops the worker as the
// closing of its stdin does; a second one kills it. It exits 0 when the
// driver stopped it, else 2 with the error on stderr, as `locktest
// worker` does.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/locktest/locktest/workloads"
)

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintf(os.Stderr, "locktest-worker: takes no arguments, got %q\n", os.Args[1:])
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second signal kills the worker at once
	}()
	err := workloads.RunWorker(ctx, os.Stdin, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "locktest-worker: worker:", err)
		os.Exit(2)
	}
}
