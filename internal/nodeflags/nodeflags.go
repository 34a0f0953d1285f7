// Package nodeflags parses the command line of a server that locktest's
// node program embeds (`locktest node etcd`, `locktest node nats`), so
// that each server's package declares only its flags.
package nodeflags

import (
	"errors"
	"flag"
	"fmt"
)

// ErrHelp is returned by Parse when the command line asked for the usage
// (-h or --help), which the flag set has already printed: the caller
// should exit without error and without starting its server.
var ErrHelp = flag.ErrHelp

// Parse parses args into fs, whose flags are already declared. It refuses
// positional arguments and, in the order given, each flag of required
// that is missing or empty. Every error but ErrHelp is one line that
// begins with what (say "etcd node") and names the flag.
func Parse(fs *flag.FlagSet, what string, args []string, required ...string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ErrHelp
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected arguments %q", what, fs.Args())
	}
	for _, name := range required {
		f := fs.Lookup(name)
		if f == nil {
			return fmt.Errorf("%s: --%s is required, and no such flag is declared", what, name)
		}
		if f.Value.String() == "" {
			return fmt.Errorf("%s: --%s is required", what, name)
		}
	}
	return nil
}
