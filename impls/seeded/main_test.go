package seeded

import (
	"testing"

	"github.com/locktest/locktest/testkit/testexe"
)

// The test binary doubles as the etcd member and NATS server programs.
func TestMain(m *testing.M) { testexe.Main(m) }
