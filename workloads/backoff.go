package workloads

import "time"

// The retry policies after a failed acquire.
const (
	// BackoffExponential waits a random time in [0, min(RetryMax,
	// Retry·2^(n-1))] after the n-th failed acquire in a row ("full
	// jitter"): what real lock clients do (redsync waits a random
	// 50–250 ms, redis-py's Lock a fixed 100 ms, tooz and kazoo back off),
	// so that clients that lost do not keep the winner's core and the lock
	// service busy.
	BackoffExponential = "exponential"
	// BackoffUniform waits a random time in [0, Retry] after every failed
	// acquire: the tight retry, which keeps contention at its highest.
	BackoffUniform = "uniform"
)

// Backoffs lists the retry policies.
var Backoffs = []string{BackoffExponential, BackoffUniform}

// Backoff says how long a client waits after a failed acquire.
type Backoff struct {
	Policy string `json:"policy"`
	// Retry is the longest first wait.
	Retry Duration `json:"retry"`
	// Max caps the exponential wait; below Retry it is Retry.
	Max Duration `json:"max,omitempty"`
}

// Wait returns the wait after the n-th failed acquire in a row (n ≥ 1),
// from r uniform in [0, 1).
func (b Backoff) Wait(n int, r float64) time.Duration {
	hi := time.Duration(b.Retry)
	if b.Policy == BackoffExponential {
		limit := max(time.Duration(b.Max), hi)
		for i := 1; i < n && hi < limit; i++ {
			hi *= 2
		}
		hi = min(hi, limit)
	}
	if hi <= 0 {
		return 0
	}
	return time.Duration(r * float64(hi+1))
}
