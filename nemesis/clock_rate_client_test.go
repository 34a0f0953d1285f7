package nemesis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// rateClients is a pool whose workers' clocks can run at a rate, or, with
// why, cannot.
type rateClients struct {
	fakeClients
	why   string
	rates map[int]float64
	dead  map[int]bool
}

func (c *rateClients) ClockRateReason() string { return c.why }

func (c *rateClients) SetClockRate(p int, f float64) error {
	if c.dead[p] {
		return fmt.Errorf("worker p%d exited", p)
	}
	c.add("rate p%d %g", p, f)
	c.rates[p] = f
	return nil
}

// TestClockRateClient runs one worker's clock at the setting's rate,
// records the rate in its target and the window as its length, and sets
// it back to the real rate at the heal; a pool that cannot makes the
// fault unavailable with its reason, and the setting refuses 1 and rates
// that are not positive.
func TestClockRateClient(t *testing.T) {
	c := &rateClients{fakeClients: fakeClients{procs: []int{0, 1}}, rates: map[int]float64{}}
	env := Env{Cluster: &fakeCluster{nodes: nodes("n1")}, Clients: c}.With(Window.Is(3*time.Second), ClockRate.Is(0.25), PausePoint.Is(""))
	f := buildOne(t, "clock-rate-client", env)
	v, err := f.Inject(context.Background(), testRng())
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Targets) != 1 || !strings.HasSuffix(v.Targets[0], "×0.25") || v.Duration != int64(3*time.Second) {
		t.Errorf("recorded targets %v, duration %v; want one worker ×0.25 for 3s", v.Targets, time.Duration(v.Duration))
	}
	p := int(v.Targets[0][1] - '0')
	if c.rates[p] != 0.25 {
		t.Errorf("rates %v, want p%d at 0.25", c.rates, p)
	}
	healed, err := f.Heal(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c.rates[p] != 1 || !slices.Equal(healed.Targets, []string{fmt.Sprintf("p%d", p)}) {
		t.Errorf("after the heal: rates %v, heal targets %v; want p%d at 1", c.rates, healed.Targets, p)
	}

	// A worker that died since needs no heal, and the heal says so.
	f.Inject(context.Background(), testRng())
	c.dead = map[int]bool{0: true, 1: true}
	if healed, err := f.Heal(context.Background()); err != nil || len(healed.Targets) != 0 {
		t.Errorf("heal of dead workers: %v, %v; want nothing healed and no error", healed.Targets, err)
	}

	// At a point (after-acquire, the default): the first worker there,
	// which goes on at once with its clock at the rate.
	c.calls, c.dead = nil, nil
	pf := buildOne(t, "clock-rate-client", env.With(PausePoint.Is("after-acquire")))
	if v, err := pf.Inject(context.Background(), testRng()); err != nil || v.Point != "after-acquire" {
		t.Fatalf("at a point: %+v, %v", v, err)
	}
	if got := strings.Join(c.log(), "; "); !strings.Contains(got, "rate p") || !strings.Contains(got, "continue p") || strings.Index(got, "rate p") > strings.Index(got, "continue p") {
		t.Errorf("calls %q: want the rate set, then the worker let go on", got)
	}
	pf.Heal(context.Background())

	c.why = "no worker whose clock can run at a rate: the go command is missing"
	if _, err := Build([]string{"clock-rate-client"}, env); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "go command") {
		t.Errorf("a pool that cannot: %v, want unavailable with its reason", err)
	}
	for _, bad := range []string{"1", "0", "-2"} {
		var vs Values
		if err := ClockRate.SetText(&vs, bad); err == nil {
			if err := ClockRate.Check(vs); err == nil {
				t.Errorf("--clock-rate %s was accepted", bad)
			}
		}
	}
}
