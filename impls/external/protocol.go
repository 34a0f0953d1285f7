// Package external runs a lock client written in any language as a child
// program that speaks the client protocol: JSON lines on its standard input
// and output. docs/clients.md is the protocol's reference; this file is its
// definition in Go.
//
// The driver of a run starts the program once to read its capabilities
// (Probe); each worker then starts its own copy and drives it through
// Client, an impls.Client, so every fault and resource mode works as with
// the Go impls. The mapping onto the history is theirs: an ok reply is an
// ok op, fail is a certain failure, and unknown, garbage, a reply to
// another request, a reply after the deadline or no reply at all is an op
// of unknown outcome (info) that names what went wrong. A program that
// exits is a dead client: the worker exits with it, and the pool replaces
// it with a new process, as a crashed client.
package external

import (
	"encoding/json"
	"fmt"
)

// Version is the protocol version this package speaks. A program that
// answers hello with another version is refused at start.
const Version = 1

// The message types.
const (
	// Driver to program.
	TypeHello   = "hello"   // the run's settings; answered by hello_ok
	TypeAcquire = "acquire" // answered by ok, fail or unknown
	TypeRelease = "release" // answered by ok, fail or unknown
	TypeGo      = "go"      // after a point: go on
	// Program to driver.
	TypeHelloOK = "hello_ok"
	TypeOK      = "ok"
	TypeFail    = "fail"
	TypeUnknown = "unknown"
	TypePoint   = "point" // reached one of its announced pause points
	// TypeLost is a notice the program may send at any time, unasked: its
	// library said a lease is gone, or may be gone. It is answered by
	// nothing.
	TypeLost = "lost"
)

// Node is one node of the backend as the program sees it.
type Node struct {
	Name string `json:"name"`
	Addr string `json:"addr"`
	Role string `json:"role,omitempty"`
}

// Hello is the first message a program reads.
type Hello struct {
	Type     string `json:"type"`
	Protocol int    `json:"protocol"`
	// Probe is set when the driver only wants the capabilities: there are
	// no nodes, and the program should answer and then exit at the end of
	// its input without connecting anywhere.
	Probe bool `json:"probe,omitempty"`
	// Process is the logical process id of the worker.
	Process int `json:"process"`
	// Backend names the lock service ("redis", "zookeeper", ...).
	Backend string `json:"backend"`
	Nodes   []Node `json:"nodes"`
	// Locks are the lock names the worker will ask for.
	Locks []string `json:"locks"`
	// TTLMs is the lease length the run asks for, and DeadlineMs the
	// longest an op may take before it counts as of unknown outcome.
	TTLMs      int64 `json:"ttl_ms"`
	DeadlineMs int64 `json:"deadline_ms"`
	// Params are the run's --client-opt settings.
	Params map[string]string `json:"params,omitempty"`
}

// Caps is the program's answer to hello: what it is and what it can do.
type Caps struct {
	Type     string `json:"type"`
	Protocol int    `json:"protocol"`
	// Name and Library name the client (its adapter) and the library it
	// wraps; Version is that library's version.
	Name    string `json:"name"`
	Library string `json:"library"`
	Version string `json:"version"`
	// Fenced says that an acquire's ok carries a fencing token.
	Fenced bool `json:"fenced"`
	// Expires says that a lease ends by itself; Validity says how the
	// program states how long: ValidityTTL or ValidityReported.
	Expires  bool   `json:"expires"`
	Validity string `json:"validity,omitempty"`
	// Blocking says that an acquire waits for a held lock until its
	// deadline rather than failing at once.
	Blocking bool `json:"blocking"`
	// Points are the pause points the program reports as it passes them.
	Points []string `json:"points,omitempty"`
	// Notices says in a few words what tells the program that a lease is
	// lost, when it sends lost notices (a library's connection listener);
	// empty when it sends none.
	Notices string `json:"notices,omitempty"`
	// Doc says in one sentence what the client does.
	Doc string `json:"doc,omitempty"`
}

// The ways a program states how long a lease is valid.
const (
	// ValidityTTL: for the ttl asked for, unless an ok says valid_ms.
	ValidityTTL = "ttl"
	// ValidityReported: for the valid_ms of each ok; an ok without it is
	// a lease that does not expire (a session lock).
	ValidityReported = "valid_ms"
)

// Request is an acquire, a release or a go.
type Request struct {
	Type string `json:"type"`
	ID   int64  `json:"id,omitempty"`
	Lock string `json:"lock,omitempty"`
	// TTLMs is the lease length asked for (acquire); DeadlineMs the time
	// left before the op's deadline when it was sent.
	TTLMs      int64 `json:"ttl_ms,omitempty"`
	DeadlineMs int64 `json:"deadline_ms,omitempty"`
	// Value and Token identify the lease to release, as its acquire's ok
	// gave them.
	Value string  `json:"value,omitempty"`
	Token *uint64 `json:"token,omitempty"`
	// Point names the pause point a go lets the program go on from.
	Point string `json:"point,omitempty"`
}

// Reply is ok, fail, unknown or point.
type Reply struct {
	Type string `json:"type"`
	ID   int64  `json:"id"`
	// Token (acquire ok, when fenced), Value (acquire ok: the unique value
	// the program wrote into the lock service) and ValidMs (acquire ok:
	// how long the lease is valid from when the acquire was sent; absent:
	// the ttl asked for when the client's leases expire).
	Token   *uint64 `json:"token,omitempty"`
	Value   string  `json:"value,omitempty"`
	ValidMs *int64  `json:"valid_ms,omitempty"`
	// Removed (release ok) is the lock value the release deleted, when the
	// program can tell.
	Removed string `json:"removed,omitempty"`
	// Error says why, for fail and unknown.
	Error string `json:"error,omitempty"`
	// Point names the pause point reached.
	Point string `json:"point,omitempty"`
	// Lock, with Value, names the lease a lost notice is about (both
	// empty: every lease the program holds), and Reason is its library's
	// word for what happened.
	Lock   string `json:"lock,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// parseCaps reads a hello_ok line and checks it.
func parseCaps(line []byte) (Caps, error) {
	var c Caps
	if err := json.Unmarshal(line, &c); err != nil {
		return Caps{}, fmt.Errorf("its answer to hello is not JSON: %q", truncate(line))
	}
	switch {
	case c.Type != TypeHelloOK:
		return Caps{}, fmt.Errorf("it answered hello with %q, want %s", c.Type, TypeHelloOK)
	case c.Protocol != Version:
		return Caps{}, fmt.Errorf("it speaks protocol %d, and locktest speaks %d", c.Protocol, Version)
	case c.Name == "":
		return Caps{}, fmt.Errorf("its hello_ok has no name")
	case c.Validity != "" && c.Validity != ValidityTTL && c.Validity != ValidityReported:
		return Caps{}, fmt.Errorf("its hello_ok has validity %q, want %s or %s", c.Validity, ValidityTTL, ValidityReported)
	}
	return c, nil
}

// truncate shortens a line for an error message.
func truncate(b []byte) string {
	const most = 200
	if len(b) > most {
		return string(b[:most]) + "…"
	}
	return string(b)
}
