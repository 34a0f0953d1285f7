package scenarios

// Library code never picks the lock drivers: only the command (and tests)
// register them, by importing impls/all.
import _ "github.com/locktest/locktest/impls/all"
