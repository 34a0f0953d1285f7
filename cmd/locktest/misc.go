package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/matrix"
	"github.com/locktest/locktest/nemesis"
	"github.com/locktest/locktest/run"
	"github.com/locktest/locktest/runstore"
	"github.com/locktest/locktest/workloads"
)

// listing is what `locktest list --json` writes (docs/schemas/list.schema.json).
type listing struct {
	SchemaVersion int           `json:"schema_version"`
	Impls         []listedImpl  `json:"impls"`
	Seeded        []listedImpl  `json:"seeded"`
	Faults        []listedFault `json:"faults"`
	Classes       []listedClass `json:"classes"`
	ResourceModes []string      `json:"resource_modes"`
}

type listedImpl struct {
	Name        string   `json:"name"`
	Backend     string   `json:"backend"`
	Nodes       int      `json:"nodes"`
	Fenced      bool     `json:"fenced"`
	Doc         string   `json:"doc,omitempty"`
	PausePoints []string `json:"pause_points,omitempty"`
	Notices     string   `json:"notices,omitempty"`
	SeededFrom  string   `json:"seeded_from,omitempty"`
	Bug         string   `json:"bug,omitempty"`
}

type listedFault struct {
	Name     string   `json:"name"`
	Family   string   `json:"family"`
	Doc      string   `json:"doc"`
	Heal     string   `json:"heal"`
	Settings []string `json:"settings,omitempty"`
}

type listedClass struct {
	Name   string   `json:"name"`
	Title  string   `json:"title"`
	Faults []string `json:"faults"`
	Doc    string   `json:"doc"`
}

// listSchemaVersion is the version of list.json's form.
const listSchemaVersion = 1

// listAll gathers what `locktest list` prints, from the registries.
func listAll() listing {
	l := listing{SchemaVersion: listSchemaVersion, Impls: []listedImpl{}, Seeded: []listedImpl{}, Faults: []listedFault{}, Classes: []listedClass{}}
	one := func(n string) listedImpl {
		i, _ := impls.Lookup(n)
		return listedImpl{Name: n, Backend: i.Backend, Nodes: i.Nodes, Fenced: i.Fenced, Doc: i.Doc, PausePoints: i.Points,
			Notices: i.Notices, SeededFrom: i.SeededFrom, Bug: i.Seeded}
	}
	for _, n := range impls.Names() {
		l.Impls = append(l.Impls, one(n))
	}
	for _, n := range impls.SeededNames() {
		l.Seeded = append(l.Seeded, one(n))
	}
	for _, s := range nemesis.Specs() {
		l.Faults = append(l.Faults, listedFault{Name: s.Name, Family: string(s.Family), Doc: s.Doc, Heal: s.Heal, Settings: s.Settings})
	}
	for _, c := range matrix.Classes {
		l.Classes = append(l.Classes, listedClass{Name: string(c), Title: matrix.ClassTitle(c), Faults: append([]string{}, matrix.ClassFaults(c)...), Doc: matrix.ClassDoc(c)})
	}
	for _, m := range []workloads.Mode{workloads.ModeNone, workloads.ModeFenced, workloads.ModeCheckAndSet, workloads.ModeEtcdGuarded} {
		l.ResourceModes = append(l.ResourceModes, string(m))
	}
	return l
}

func newListCmd() *cobra.Command {
	var seeded bool
	var jsonOut string
	c := &cobra.Command{
		Use:   "list",
		Short: "List the lock implementations, faults, the matrix's fault classes and the resource modes",
		Long: `list prints the lock implementations, the faults, the matrix's fault classes
(each a named group of those faults: locktest matrix --faults takes a class
or a fault) and the resource modes. --json writes all of it, the seeded
impls too, as JSON (docs/schemas/list.schema.json).

--seeded prints instead the zoo: correct recipes with one bug planted each,
which measure how well the harness finds bugs (docs/seeded-bugs.md). They
run only when named (locktest run --impl, locktest matrix --impl), never in
a default set.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := run.CheckOutputs(run.Output{Flag: "--json", Path: jsonOut}); err != nil {
				return usageError{err}
			}
			l := listAll()
			if jsonOut != "" {
				if err := runstore.WriteJSON(jsonOut, l); err != nil {
					return fmt.Errorf("--json: %w", err)
				}
			}
			w := cmd.OutOrStdout()
			if seeded {
				fmt.Fprintln(w, "seeded impls (one bug each, run only when named):")
				for _, i := range l.Seeded {
					fmt.Fprintf(w, "  %-28s %d×%s, a variant of %s. Bug: %s.\n", i.Name, i.Nodes, i.Backend, i.SeededFrom, i.Bug)
					if len(i.PausePoints) > 0 {
						fmt.Fprintf(w, "  %-28s pause points: %s\n", "", strings.Join(i.PausePoints, ", "))
					}
				}
				return nil
			}
			fmt.Fprintln(w, "impls:")
			for _, i := range l.Impls {
				fenced := "no fencing token"
				if i.Fenced {
					fenced = "fencing token"
				}
				fmt.Fprintf(w, "  %-20s %d×%s, %s. %s\n", i.Name, i.Nodes, i.Backend, fenced, i.Doc)
				if len(i.PausePoints) > 0 {
					fmt.Fprintf(w, "  %-20s pause points: %s\n", "", strings.Join(i.PausePoints, ", "))
				}
				if i.Notices != "" {
					fmt.Fprintf(w, "  %-20s lost notices: when %s\n", "", i.Notices)
				}
			}
			fmt.Fprintln(w, "faults:")
			for _, f := range l.Faults {
				fmt.Fprintf(w, "  %-20s [%s] %s (heal: %s).\n", f.Name, f.Family, f.Doc, f.Heal)
			}
			fmt.Fprintln(w, "fault classes of locktest matrix (named groups of the faults above):")
			for _, c := range l.Classes {
				fmt.Fprintf(w, "  %-20s %s\n", c.Name, c.Doc)
			}
			fmt.Fprintln(w, "resource modes:")
			for _, m := range l.ResourceModes {
				fmt.Fprintf(w, "  %s\n", m)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&seeded, "seeded", false, "list the seeded impls (the zoo of planted bugs) instead")
	jsonFlag(c, &jsonOut, "list.json, every impl (the seeded ones too), fault, class and resource mode,", "no other place")
	return c
}

func newWorkerCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "worker",
		Short:  "Run one lock client, driven over stdin/stdout by `locktest run` (internal)",
		Hidden: true,
		Args:   args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := workloads.RunWorker(cmd.Context(), os.Stdin, os.Stdout); err != nil {
				return fmt.Errorf("worker: %w", err)
			}
			return nil
		},
	}
}
