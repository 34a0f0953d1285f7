package local

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCredSpawnDiesWithItsDriver starts, from a child driver process, a
// program under another user (as PostgreSQL is started), SIGKILLs the
// driver, and checks the program died with it: the kernel clears the
// parent-death signal on the user change, so setpriv must set it again.
func TestCredSpawnDiesWithItsDriver(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to change user")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("setpriv not installed")
	}
	driver := exec.Command(os.Args[0])
	driver.Env = append(os.Environ(), nodeEnv+"=spawn-as-nobody")
	out, err := driver.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := driver.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		driver.Process.Kill()
		t.Fatalf("driver said nothing: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	// Wait until setpriv has exec'd the program as nobody.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); strings.TrimSpace(string(b)) == "sleep" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	driver.Process.Kill()
	driver.Wait()
	deadline = time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); os.IsNotExist(err) {
			return
		}
		if b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); strings.Contains(string(b), ") Z ") {
			return // dead, waiting to be reaped by init
		}
		time.Sleep(20 * time.Millisecond)
	}
	exec.Command("kill", "-9", strconv.Itoa(pid)).Run()
	t.Fatalf("the program (pid %d) run under another user outlived its killed driver", pid)
}
