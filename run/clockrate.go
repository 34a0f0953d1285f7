package run

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/locktest/locktest/clusters/clockrate"
	"github.com/locktest/locktest/impls"
	"github.com/locktest/locktest/impls/golib"
	"github.com/locktest/locktest/nemesis"
)

// clockWorker makes the run's workers locktest built over a Go runtime
// whose clock can run at a rate and whose wall clock can be moved
// (clusters/clockrate), when a fault of the run needs one: clock-rate-
// client, or a fault that moves a client's wall clock on an impl whose
// library reads the runtime's clock (impls.Impl.RuntimeClock). The build,
// from locktest's source tree (golib.Source), is cached (golib.
// BuildProgram); its output goes to logDir/clockrate-build.log. It sets
// WorkerCommand and returns what the pool says of the workers' clocks:
// why they cannot run at a rate, and why their wall clock cannot be moved
// as the impl reads it ("" each where it can). A worker that cannot be
// built so makes those faults unavailable, with the reason: never a run
// whose fault silently did nothing.
func (c *Config) clockWorker(ctx context.Context, impl impls.Impl, logDir string, lg *slog.Logger) (rateWhy, skewWhy string) {
	rate := nemesis.Needs(c.faultParts(), nemesis.NeedRateClients) || planNeeds(c.Plan, nemesis.NeedRateClients)
	skew := impl.RuntimeClock && (nemesis.Needs(c.faultParts(), nemesis.NeedSkewClients) || planNeeds(c.Plan, nemesis.NeedSkewClients))
	rateWhy = "the workers run at the real rate: no fault of the run asked for a clock that runs at another"
	if !rate && !skew {
		return rateWhy, ""
	}
	bin, err := c.buildClockWorker(ctx, logDir, lg)
	if err != nil {
		rateWhy = "no worker whose clock can run at a rate: " + err.Error()
		if skew {
			skewWhy = fmt.Sprintf("the impl %s times its leases with the Go runtime's clock, which only a worker built over a runtime whose clock can move reaches, and there is none: %v", impl.Name, err)
		}
		return rateWhy, skewWhy
	}
	c.WorkerCommand = []string{bin, "worker"}
	lg.Info("workers with a clock that can run at a rate", "program", bin)
	return "", ""
}

// buildClockWorker builds, or finds in the cache, locktest over the
// patched runtime.
func (c *Config) buildClockWorker(ctx context.Context, logDir string, lg *slog.Logger) (string, error) {
	if c.external() || len(c.Libs) > 0 {
		return "", fmt.Errorf("the workers are a client program of their own, whose clock locktest does not build")
	}
	src, err := golib.Source()
	if err != nil {
		return "", err
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("it is built with the go command, and there is none on PATH")
	}
	goroot, err := exec.CommandContext(ctx, goCmd, "env", "GOROOT").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOROOT: %v", err)
	}
	overlayDir, err := os.MkdirTemp("", "locktest-clockrate-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(overlayDir)
	overlay, err := clockrate.Overlay(strings.TrimSpace(string(goroot)), overlayDir)
	if err != nil {
		return "", err
	}
	var inputs [][]byte
	for _, name := range clockrate.Patched() {
		b, err := os.ReadFile(filepath.Join(overlayDir, name))
		if err != nil {
			return "", err
		}
		inputs = append(inputs, b)
	}
	log, err := os.Create(filepath.Join(logDir, "clockrate-build.log"))
	if err != nil {
		return "", err
	}
	defer log.Close()
	lg.Info("building the workers over a runtime whose clock can run at a rate (cached once built)", "src", src)
	// The overlay's folder differs at each build; the flags in the
	// checksum are those without it, the patched files its inputs.
	return golib.BuildProgram(ctx, golib.ProgramRequest{Src: src, Package: "./cmd/locktest", Name: "locktest-clockrate",
		Flags: clockrate.BuildFlags(overlay), Key: clockrate.BuildFlags("OVERLAY"), Inputs: inputs}, log)
}

// planNeeds reports whether a fault of the schedule plan needs ability a.
func planNeeds(plan *nemesis.Plan, a nemesis.Ability) bool {
	if plan == nil {
		return false
	}
	for _, f := range plan.Faults {
		if nemesis.Needs([]string{f.Fault}, a) {
			return true
		}
	}
	return false
}
