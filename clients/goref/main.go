// Command goref is the reference client adapter: it speaks locktest's
// client protocol (docs/clients.md) on its standard input and output
// around one of locktest's own Go impls, so that a run through the
// protocol can be compared with the same impl run natively.
//
//	goref -impl redis-set-nx-px
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/locktest/locktest/impls/external"

	_ "github.com/locktest/locktest/impls/all"
)

func main() {
	impl := flag.String("impl", "redis-set-nx-px", "the Go impl to serve")
	flag.Parse()
	if err := external.Serve(context.Background(), os.Stdin, os.Stdout, *impl); err != nil {
		fmt.Fprintln(os.Stderr, "goref:", err)
		os.Exit(1)
	}
}
