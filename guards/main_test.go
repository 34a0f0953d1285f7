package guards

import (
	"fmt"
	"os"
	"testing"

	"github.com/locktest/locktest/testkit"

	// The registries the docs are held to: every impl of locktest.
	_ "github.com/locktest/locktest/impls/all"
)

// repoRoot is the repository, from this package's folder.
const repoRoot = ".."

// cli is the locktest binary, built once for these tests; bin is its path.
var (
	cli testkit.CLI
	bin string
)

// TestMain builds the command once, for every test of the package.
func TestMain(m *testing.M) { os.Exit(withCLI(m)) }

// withCLI runs the tests with the command built, and removes it after.
func withCLI(m *testing.M) int {
	c, remove, err := testkit.BuildCLI()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer remove()
	cli, bin = c, c.Bin
	return m.Run()
}
