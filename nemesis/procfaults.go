package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/history"
)

// pauseNode freezes one node process with SIGSTOP for the window and thaws
// it with SIGCONT: a node that answers nothing, then everything at once.
type pauseNode struct {
	env    Env
	pauser clusters.Pauser

	mu     sync.Mutex
	paused []clusters.Node
}

func newPauseNode(env Env) (Fault, error) {
	p, ok := env.Cluster.(clusters.Pauser)
	if !ok {
		return nil, fmt.Errorf("%w: the cluster provider cannot pause nodes", ErrUnavailable)
	}
	if env.Window <= 0 {
		return nil, fmt.Errorf("fault window must be positive, got %v", env.Window)
	}
	return &pauseNode{env: env, pauser: p}, nil
}

func (f *pauseNode) Name() string            { return "pause-node" }
func (f *pauseNode) HealName() string        { return "resume-node" }
func (f *pauseNode) Duration() time.Duration { return f.env.Window }

func (f *pauseNode) Inject(ctx context.Context, rng *rand.Rand) (history.Value, error) {
	n, roles, err := f.env.pickNode(ctx, f.Name(), f.env.candidates(f.Name()), rng)
	if err != nil {
		return history.Value{}, err
	}
	v := history.Value{Targets: []string{n.Name}, Duration: int64(f.env.Window), Roles: roles}
	err = f.pauser.Pause(ctx, n)
	f.mu.Lock()
	if !slices.Contains(f.paused, n) {
		f.paused = append(f.paused, n)
	}
	f.mu.Unlock()
	if err != nil {
		return v, fmt.Errorf("pause %s: %w", n.Name, err)
	}
	return v, nil
}

func (f *pauseNode) Heal(ctx context.Context) (history.Value, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var v history.Value
	for len(f.paused) > 0 {
		n := f.paused[0]
		if err := f.pauser.Resume(ctx, n); err != nil {
			return v, fmt.Errorf("resume %s: %w", n.Name, err)
		}
		v.Targets = append(v.Targets, n.Name)
		f.paused = f.paused[1:]
	}
	return v, nil
}

// Targeter is an optional ability of a cluster whose nodes are not all data
// nodes (Sentinel's sentinels, say): node faults pick among Targets only.
type Targeter interface {
	Targets() []clusters.Node
}

// targetNodes returns the nodes node faults may hit.
func targetNodes(c clusters.Cluster) []clusters.Node {
	if t, ok := c.(Targeter); ok {
		return t.Targets()
	}
	return c.Nodes()
}

// killClient SIGKILLs one worker process, as a crashed client host would
// lose it — optionally while it holds the lock — and its heal starts a
// replacement with a new process id on the same client host.
type killClient struct {
	env     Env
	clients CrashableClients

	mu   sync.Mutex
	dead []int
}

func newKillClient(env Env) (Fault, error) {
	c, ok := env.Clients.(CrashableClients)
	if !ok || env.Clients == nil {
		return nil, fmt.Errorf("%w: the client pool cannot kill and replace workers", ErrUnavailable)
	}
	if env.Window <= 0 {
		return nil, fmt.Errorf("fault window must be positive, got %v", env.Window)
	}
	return &killClient{env: env, clients: c}, nil
}

func (f *killClient) Name() string            { return "kill-client" }
func (f *killClient) HealName() string        { return "replace-client" }
func (f *killClient) Duration() time.Duration { return f.env.Window }

func (f *killClient) Inject(ctx context.Context, rng *rand.Rand) (history.Value, error) {
	p, err := f.env.pickProcess(f.Name(), f.clients.Processes(), rng)
	if err != nil {
		return history.Value{}, err
	}
	v := history.Value{Targets: []string{fmt.Sprintf("p%d", p)}}
	if f.env.KillHolder {
		v.Point = f.env.KillPoint
		if v.Point == "" {
			v.Point = "after-acquire"
		}
		if err := f.clients.Arm(p, v.Point); err != nil {
			return v, fmt.Errorf("%w: arm p%d: %v", errNotApplied, p, err)
		}
		if _, err := f.clients.WaitPoint(ctx, p); err != nil {
			_ = f.clients.Disarm(p)
			return v, fmt.Errorf("%w: p%d did not reach %s: %v", errNotApplied, p, v.Point, err)
		}
	}
	if err := f.clients.Kill(ctx, p); err != nil {
		if f.env.KillHolder {
			_ = f.clients.Continue(p)
		}
		return v, fmt.Errorf("%w: kill p%d: %v", errNotApplied, p, err)
	}
	f.mu.Lock()
	f.dead = append(f.dead, p)
	f.mu.Unlock()
	return v, nil
}

func (f *killClient) Heal(ctx context.Context) (history.Value, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var v history.Value
	for len(f.dead) > 0 {
		p := f.dead[0]
		np, err := f.clients.Replace(ctx, p)
		if err != nil {
			return v, fmt.Errorf("replace p%d: %w", p, err)
		}
		v.Targets = append(v.Targets, fmt.Sprintf("p%d->p%d", p, np))
		f.dead = f.dead[1:]
	}
	return v, nil
}
