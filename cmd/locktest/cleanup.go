package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/locktest/locktest/clusters/clientaddr"
	"github.com/locktest/locktest/clusters/engine"
	"github.com/locktest/locktest/clusters/local/netns"
	sshp "github.com/locktest/locktest/clusters/ssh"
)

func newCleanupCmd() *cobra.Command {
	var dry, insecure bool
	var provider, inventory string
	c := &cobra.Command{
		Use:   "cleanup",
		Short: "Remove what crashed runs left: network namespaces (and the processes in them), links, iptables rules, containers and Docker networks",
		Long: `cleanup removes the network namespaces, veths, bridges and FORWARD rules
that runs made and could not remove because their driver was killed. It
finds them by the names locktest gives them (namespaces locktest-<lab>-*,
links lt<lab>*, rules commented locktest-<lab>) and spares the labs of runs
that are still going. Node and worker processes die with their driver (they
have a parent-death signal); any still inside a namespace is killed with it.

Under the docker provider, containers do not die with their driver: cleanup
removes the containers and Docker networks labelled locktest.run whose
driver (label locktest.owner-pid) is gone, and nothing else — not the
images locktest built, which later runs reuse.

A MariaDB node whose run folder is too deep for a socket address has its
socket in the temporary folder (locktest-mariadb-*.sock); cleanup removes
those that no server answers on.

With --provider ssh --inventory FILE, cleanup clears the inventory's hosts
instead: the run directories (<workdir>/locktest-<run>) whose owner file
names this control host and a driver that is gone, the redis-server each
started (by the pid in its pid file), and the iptables rules commented
locktest:<run>.

Either way it removes, on this host, the client addresses of ssh and docker
runs whose driver is gone: the addresses they added, their cgroups (and any
client process left in them) and their nat rules commented
locktest-clients:<run>.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := cmd.OutOrStdout()
			switch {
			case provider == "ssh" && inventory == "":
				return usageError{errors.New("cleanup --provider ssh needs --inventory FILE")}
			case provider == "ssh":
				return cleanupSSH(cmd.Context(), w, inventory, insecure, dry)
			case provider != "":
				return usageError{fmt.Errorf("cleanup --provider %q: want ssh (without it, cleanup clears what local and docker runs left)", provider)}
			case inventory != "" || insecure:
				return usageError{errors.New("--inventory and --insecure-ignore-host-key need --provider ssh")}
			}
			if err := cleanupLabs(cmd.Context(), w, dry); err != nil {
				return err
			}
			if err := cleanupClientAddrs(cmd.Context(), w, dry); err != nil {
				return err
			}
			if err := cleanupSockets(w, os.TempDir(), dry); err != nil {
				return err
			}
			return cleanupDocker(cmd.Context(), w, dry)
		},
	}
	c.Flags().BoolVarP(&dry, "dry-run", "n", false, "only list what would be removed")
	c.Flags().StringVar(&provider, "provider", "", "ssh: clear the hosts of --inventory instead (run directories, servers and iptables rules of runs whose driver is gone)")
	c.Flags().StringVar(&inventory, "inventory", "", "the ssh provider's inventory file, with --provider ssh")
	c.Flags().BoolVar(&insecure, "insecure-ignore-host-key", false, "with --provider ssh: do not check the hosts' keys")
	return c
}

// cleanupLabs removes the network labs of dead drivers.
func cleanupLabs(ctx context.Context, w io.Writer, dry bool) error {
	if err := netns.Check(); err != nil {
		fmt.Fprintf(w, "nothing to do: %v\n", err)
		return nil
	}
	all, err := netns.Find(ctx)
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	left := all.Orphans()
	if dry {
		printLeft(w, "would remove", left)
		return nil
	}
	removed, err := netns.Cleanup(ctx)
	printLeft(w, "removed", removed)
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	return nil
}

// socketPattern names the Unix sockets of MariaDB nodes whose directory is
// too long for a socket address (clusters/local puts them in the temporary
// folder).
const socketPattern = "locktest-mariadb-*.sock"

// cleanupSockets removes the sockets matching socketPattern in dir that no
// server answers on: those of nodes that a killed driver took down with it.
// A socket a live server listens on, in whatever network namespace, accepts
// the connection and is kept.
func cleanupSockets(w io.Writer, dir string, dry bool) error {
	paths, err := filepath.Glob(filepath.Join(dir, socketPattern))
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	var stale []string
	for _, p := range paths {
		if fi, err := os.Lstat(p); err != nil || fi.Mode().Type() != os.ModeSocket {
			continue // not a socket: not ours
		}
		c, err := net.DialTimeout("unix", p, time.Second)
		if err == nil {
			c.Close()
			continue
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			continue // not ours to judge (a permission error, say)
		}
		if !dry {
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("cleanup: %w", err)
			}
		}
		stale = append(stale, p)
	}
	if len(stale) > 0 {
		verb := "removed"
		if dry {
			verb = "would remove"
		}
		fmt.Fprintf(w, "%s %d stale sockets: %s\n", verb, len(stale), strings.Join(stale, ", "))
	}
	return nil
}

// cleanupDocker removes the containers and networks of docker runs whose
// driver is gone. Without a reachable Docker engine there is nothing to do.
func cleanupDocker(ctx context.Context, w io.Writer, dry bool) error {
	octx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	e, err := engine.Open(octx, nil)
	if err != nil {
		fmt.Fprintf(w, "docker: nothing to do: %v\n", err)
		return nil
	}
	defer e.Close()
	all, err := e.Find(ctx)
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	if dry {
		printDockerLeft(w, "would remove", engine.Orphans(all))
		return nil
	}
	removed, err := e.Cleanup(ctx)
	printDockerLeft(w, "removed", removed)
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	return nil
}

func printDockerLeft(w io.Writer, verb string, ls []engine.Leftover) {
	if len(ls) == 0 {
		fmt.Fprintln(w, "docker: nothing left behind by earlier runs")
		return
	}
	for _, kind := range []string{"container", "network"} {
		var names []string
		for _, l := range ls {
			if l.Kind == kind {
				names = append(names, l.Name)
			}
		}
		if len(names) > 0 {
			fmt.Fprintf(w, "docker: %s %d %ss: %s\n", verb, len(names), kind, strings.Join(names, ", "))
		}
	}
}

func printLeft(w interface{ Write([]byte) (int, error) }, verb string, l netns.Leftovers) {
	if l.Empty() {
		fmt.Fprintln(w, "nothing left behind by earlier runs")
		return
	}
	for _, x := range []struct {
		what  string
		names []string
	}{{"namespaces", l.Namespaces}, {"links", l.Links}, {"iptables rules", l.Rules}} {
		if len(x.names) > 0 {
			fmt.Fprintf(w, "%s %d %s: %s\n", verb, len(x.names), x.what, strings.Join(x.names, ", "))
		}
	}
}

// cleanupClientAddrs removes the client addresses, cgroups and nat rules
// of ssh and docker runs whose driver is gone, on this host.
func cleanupClientAddrs(ctx context.Context, w io.Writer, dry bool) error {
	left, err := clientaddr.Cleanup(ctx, dry)
	verb := "removed"
	if dry {
		verb = "would remove"
	}
	for _, l := range left {
		fmt.Fprintf(w, "%s the client addresses of run %s (added %s; owner %s)\n", verb, l.RunID, orNone(l.Added), orNone(nonEmpty(l.Owner)))
	}
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	return nil
}

// cleanupSSH clears what killed drivers left on the hosts of an inventory.
func cleanupSSH(ctx context.Context, w io.Writer, inventory string, insecure, dry bool) error {
	inv, err := sshp.LoadInventory(inventory)
	if err != nil {
		return usageError{err}
	}
	inv.InsecureIgnoreHostKey = insecure
	conns, err := sshp.Dial(ctx, inv)
	if err != nil {
		return usageError{err}
	}
	defer sshp.CloseAll(conns)
	if err := cleanupClientAddrs(ctx, w, dry); err != nil {
		return err
	}
	left, err := sshp.Cleanup(ctx, conns, dry)
	verb := "removed"
	if dry {
		verb = "would remove"
	}
	if len(left) == 0 && err == nil {
		fmt.Fprintln(w, "ssh: nothing left behind by earlier runs")
	}
	for _, l := range left {
		fmt.Fprintf(w, "ssh: %s run %s on %s (driver %s)\n", verb, l.RunID, l.Host, l.Owner)
	}
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	return nil
}
