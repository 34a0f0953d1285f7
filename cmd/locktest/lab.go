package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/locktest/locktest/clusters/sshlab"
)

// newLabCmd is `locktest lab`: a test bed of SSH hosts on this machine for
// the ssh provider.
func newLabCmd() *cobra.Command {
	lab := &cobra.Command{
		Use:   "lab",
		Short: "Start and remove a test bed of SSH hosts (containers) for --provider ssh",
	}
	var hosts int
	var dir string
	up := &cobra.Command{
		Use:   "up",
		Short: "Start SSH hosts as containers on a Docker network of their own and write an inventory for them",
		Long: `up builds locktest's SSH image from this host's files (sshd of Debian's
openssh-server, redis-server, iptables and a few tools, and this host's
Java runtime and ZooKeeper jars when it has them; no registry), starts
--count containers of it on a Docker network of their own (a free /24 of
10.79.0.0/16), each with its own file system, network namespace and pid
space and the NET_ADMIN capability iptables needs, and writes into --dir the
lab's private key (id_ed25519), a known_hosts file with each host's key and
an inventory (lab.yaml) to pass to ` + "`locktest run --provider ssh --inventory`" + `.
Everything it makes is labelled locktest.sshlab (and locktest.sshlab-dir with
the folder); ` + "`locktest lab down --dir`" + ` with the same folder removes it.
A failed up removes what it had made.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts := sshlab.Options{Hosts: hosts, Dir: dir}
			if err := opts.Check(); err != nil {
				return usageError{err}
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return usageError{fmt.Errorf("--dir: %v", err)}
			}
			e, err := openDocker(cmd.Context())
			if err != nil {
				return err
			}
			defer e.Close()
			t0 := time.Now()
			l, err := sshlab.Up(cmd.Context(), e, opts)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "lab %s up in %v: %d hosts on %s %s (image %s)\ninventory: %s\n",
				l.ID, time.Since(t0).Round(time.Millisecond), len(l.Hosts), l.Network, l.Subnet, l.Image, l.Inventory)
			return nil
		},
	}
	up.Flags().IntVar(&hosts, "count", 5, "the number of SSH hosts (at least 5)")
	up.Flags().IntVar(&hosts, "hosts", 5, "the old name of --count")
	_ = up.Flags().MarkDeprecated("hosts", "use --count: --hosts names hosts in run and margin")
	up.Flags().StringVar(&dir, "dir", ".", "the folder that receives lab.yaml, id_ed25519 and known_hosts")
	var downDir string
	down := &cobra.Command{
		Use:   "down",
		Short: "Remove the containers and network of the SSH lab of --dir, and the files up wrote there",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if st, err := os.Stat(downDir); err != nil || !st.IsDir() {
				return usageError{fmt.Errorf("--dir %s: not a folder", downDir)}
			}
			e, err := openDocker(cmd.Context())
			if err != nil {
				return err
			}
			defer e.Close()
			ctx, cancel := context.WithTimeout(context.WithoutCancel(cmd.Context()), 2*time.Minute)
			defer cancel()
			ids, err := sshlab.Down(ctx, e, downDir)
			for _, id := range ids {
				fmt.Fprintf(cmd.OutOrStdout(), "removed lab %s\n", id)
			}
			if len(ids) == 0 && err == nil {
				fmt.Fprintln(cmd.OutOrStdout(), "no lab is up")
			}
			return err
		},
	}
	down.Flags().StringVar(&downDir, "dir", ".", "the folder the lab wrote its lab.yaml, id_ed25519 and known_hosts into")
	lab.AddCommand(up, down)
	return lab
}
