package guards

import (
	"fmt"
	"os"
	"testing"

	"github.com/locktest/locktest/e2e/testkit"

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

func TestMain(m *testing.M) {
	c, remove, err := testkit.BuildCLI()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	cli, bin = c, c.Bin
	code := m.Run()
	remove()
	os.Exit(code)
}
