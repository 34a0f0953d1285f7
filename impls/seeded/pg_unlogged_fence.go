package seeded

import (
	"github.com/locktest/locktest/impls"
)

// unloggedSequence is the sequence of seeded-pg-unlogged-fence's tokens.
const unloggedSequence = "locktest_seeded_fence"

func init() {
	registerPG(impls.Impl{
		Name: "seeded-pg-unlogged-fence", Fenced: true, TokenSource: "nextval of an UNLOGGED sequence, taken under the lock",
		Seeded: "the token counter is kept where a crash resets it: an UNLOGGED sequence, which restarts at 1 after the server's crash recovery",
		New: impls.Wrap(func(cfg impls.Config) (*advisory, error) {
			// BUG: UNLOGGED, so the crash recovery resets the sequence.
			return newAdvisory(cfg, unloggedSequence, "CREATE UNLOGGED SEQUENCE IF NOT EXISTS %s")
		}, func(c *advisory) impls.Client { return c }),
	})
}
