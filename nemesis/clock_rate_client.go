package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/locktest/locktest/history"
)

// ClockRate is the factor clock-rate-client runs a worker's clock at.
var ClockRate = NewSetting("clock-rate", Number, 0.5,
	"the factor a worker's clock runs at under clock-rate-client: 0.5 is half as fast as the real clock, 2 twice as fast",
	Bound[float64]{"must be positive and not 1", func(x float64) bool { return x > 0 && x != 1 }})

func init() {
	Register(Spec{
		FaultKind: history.FaultKind{Name: "clock-rate-client", Heal: "clock-unrate-client", Family: history.FamilyClock,
			Doc: "runs a worker's Go runtime clock, which its library times leases, renewals and timeouts with, at --clock-rate times the real rate for the window, from a pause point (the holder's, by default) or anywhere"},
		Settings: []string{"clock-rate", "pause-point", "window"},
		Needs:    []Ability{NeedRateClients},
		New:      newClockRateClient,
		pins:     pinProcess,
	})
}

// RateClients is the part of the pool clock-rate-client needs: workers
// whose runtime clock can run at a rate (clusters/clockrate).
type RateClients interface {
	Clients
	// ClockRateReason says why the workers' clocks cannot run at a
	// rate; "" when they can.
	ClockRateReason() string
	SetClockRate(process int, factor float64) error
}

// needRateClients: a fault that runs a worker's clock at a rate.
func needRateClients(env Env) error {
	c, ok := env.Clients.(RateClients)
	if !ok || env.Clients == nil {
		return fmt.Errorf("%w: the client pool cannot run a worker's clock at a rate", ErrUnavailable)
	}
	if why := c.ClockRateReason(); why != "" {
		return fmt.Errorf("%w: %s", ErrUnavailable, why)
	}
	return nil
}

// newClockRateClient runs one worker's clock at ClockRate times the real
// one, recorded in its target ("p1×0.5"), with the window as the
// duration: the first worker to reach the pause point (after-acquire by
// default: the one that just took the lock; random: any worker at once),
// which goes on at once with its clock at the rate. The heal sets every
// worker it changed that is still alive back to the real rate (its clock
// goes on from where it is: a clock that ran slow stays behind, as a real
// one would).
func newClockRateClient(env Env) (Fault, error) {
	c := env.Clients.(RateClients)
	factor, window := ClockRate.Of(env), Window.Of(env)
	if err := positive("fault window", window); err != nil {
		return nil, err
	}
	point := PausePoint.Of(env)
	return env.undoEachProcess(window, point,
		func(_ context.Context, p int, v *history.Value, _ *rand.Rand) error {
			v.Targets[0] += "×" + strconv.FormatFloat(factor, 'g', -1, 64)
			v.Duration = int64(window)
			err := c.SetClockRate(p, factor)
			if point != "" {
				_ = c.Continue(p) // it waits at the point
			}
			if err != nil {
				return fmt.Errorf("%w: %v", errNotApplied, err)
			}
			return nil
		},
		func(_ context.Context, p int) (string, error) {
			// A worker that died since needs no heal.
			if c.SetClockRate(p, 1) != nil {
				return "", nil
			}
			return procName(p), nil
		}), nil
}
