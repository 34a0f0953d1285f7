package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/clusters/engine"
	"github.com/locktest/locktest/clusters/images"
)

// newImagesCmd is `locktest images`: the images of the docker provider.
func newImagesCmd() *cobra.Command {
	imagesCmd := &cobra.Command{
		Use:   "images",
		Short: "Build and list the container images of the docker provider",
	}
	var force bool
	var nodeBinary string
	build := &cobra.Command{
		Use:   "build [backend...]",
		Short: "Build locktest's own image of each backend without pulling anything: " + strings.Join(backend.All(), ", "),
		Long: `build makes, for each backend named (all by default), an image the docker
provider then runs, without a registry, one per server program (the Redis
backends share redis's, mysql runs mariadb's): redis, zookeeper, mariadb and
postgres from this host's installed packages (the server, the libraries ldd
lists, for ZooKeeper the Java runtime and the jars), etcd from locktest's own
executable, which embeds etcd (` + "`locktest node etcd`" + `). Each root file system is
tarred and given to ` + "`docker import`" + `, tagged locktest/<image>:<tag> and labelled
locktest.image=1.
An image whose inputs have not changed is reused. Built images are kept
between runs; runs use them unless --image names another.

Backends: ` + strings.Join(backend.All(), ", ") + `.`,
		Args: args(cobra.ArbitraryArgs),
		RunE: func(cmd *cobra.Command, backends []string) error {
			opts := images.BuildOptions{Backends: backends, NodeBinary: nodeBinary, Force: force}
			if err := opts.Check(); err != nil {
				return usageError{err}
			}
			if opts.NodeBinary == "" {
				self, err := os.Executable()
				if err != nil {
					return fmt.Errorf("images build: find this executable for the etcd image: %w", err)
				}
				opts.NodeBinary = self
			}
			e, err := openDocker(cmd.Context())
			if err != nil {
				return err
			}
			defer e.Close()
			bs, err := images.Build(cmd.Context(), e, opts)
			printImages(cmd.OutOrStdout(), bs, true)
			return err
		},
	}
	build.Flags().BoolVar(&force, "force", false, "rebuild images whose inputs have not changed")
	build.Flags().StringVar(&nodeBinary, "node-binary", "", "the locktest executable the etcd image runs (default: this one)")
	list := &cobra.Command{
		Use:   "list",
		Short: "List the images locktest built",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := openDocker(cmd.Context())
			if err != nil {
				return err
			}
			defer e.Close()
			bs, err := images.ListBuilt(cmd.Context(), e)
			if err != nil {
				return err
			}
			if len(bs) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no image built by locktest: `locktest images build`")
			}
			printImages(cmd.OutOrStdout(), bs, false)
			return nil
		},
	}
	imagesCmd.AddCommand(build, list)
	return imagesCmd
}

// openDocker connects to the Docker engine, with a bounded wait.
func openDocker(ctx context.Context) (*engine.Engine, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return engine.Open(ctx, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
}

func printImages(w io.Writer, bs []images.BuiltImage, built bool) {
	for _, b := range bs {
		if b.Skipped != "" {
			fmt.Fprintf(w, "%-10s skipped: %s\n", b.Backend, b.Skipped)
			continue
		}
		line := fmt.Sprintf("%-10s %-32s %6.1f MB", b.Backend, b.Ref, float64(b.Size)/1e6)
		if built {
			what := "built"
			if b.Reused {
				what = "up to date"
			}
			line += fmt.Sprintf("  %s in %v", what, b.Took.Round(time.Millisecond))
		} else {
			line += "  " + b.Created.Format(time.RFC3339)
		}
		fmt.Fprintln(w, line)
	}
}
