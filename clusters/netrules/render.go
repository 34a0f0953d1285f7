package netrules

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/locktest/locktest/internal/shellquote"
)

// The chains that hold a place's fault rules where the place is the run's
// own (a namespace, a container): INPUT and OUTPUT jump to them, and a
// heal flushes them.
const (
	ChainIn  = "LOCKTEST-IN"
	ChainOut = "LOCKTEST-OUT"
)

// Setup returns the iptables-restore lines that create the fault chains
// and their jumps.
func Setup() []string {
	return []string{"-N " + ChainIn, "-N " + ChainOut, "-A INPUT -j " + ChainIn, "-A OUTPUT -j " + ChainOut}
}

// Flush returns the iptables-restore lines that empty the fault chains: a
// heal.
func Flush() []string { return []string{"-F " + ChainIn, "-F " + ChainOut} }

// Append returns the iptables-restore lines that append rules to the
// fault chains: "-A LOCKTEST-IN -s 10.77.3.2 -j DROP".
func Append(rules []Rule) []string {
	out := make([]string, len(rules))
	for i, r := range rules {
		chain := ChainIn
		if r.Out {
			chain = ChainOut
		}
		out[i] = "-A " + chain + " " + r.Spec() + " -j DROP"
	}
	return out
}

// Restore returns the input of an iptables-restore --noflush that applies
// lines to the filter table, all or none.
func Restore(lines []string) string {
	return "*filter\n" + strings.Join(lines, "\n") + "\nCOMMIT\n"
}

// Tag returns the comment that marks the rules of run id on a machine
// that is not the run's own: "locktest:<id>". Remove finds them by it.
func Tag(runID string) string { return "locktest:" + runID }

// Insert returns the shell script (run as root, with set -e) that inserts
// rules at the top of INPUT and OUTPUT, each with the comment tag, and
// then puts back, above them, an ACCEPT of the TCP port spare (the SSH
// port the driver reaches the machine on) in both directions.
func Insert(rules []Rule, tag string, spare int) string {
	var b strings.Builder
	b.WriteString("set -e\n")
	for _, r := range rules {
		chain := "INPUT"
		if r.Out {
			chain = "OUTPUT"
		}
		fmt.Fprintf(&b, "iptables -w -I %s %s -m comment --comment %s -j DROP\n", chain, r.Spec(), tag)
	}
	sp := strconv.Itoa(spare)
	// The ACCEPT goes (back) to the top, above the DROPs just added.
	fmt.Fprintf(&b, "iptables -w -D INPUT -p tcp --dport %[1]s -m comment --comment %[2]s -j ACCEPT 2>/dev/null || true\niptables -w -I INPUT -p tcp --dport %[1]s -m comment --comment %[2]s -j ACCEPT\n", sp, tag)
	fmt.Fprintf(&b, "iptables -w -D OUTPUT -p tcp --sport %[1]s -m comment --comment %[2]s -j ACCEPT 2>/dev/null || true\niptables -w -I OUTPUT -p tcp --sport %[1]s -m comment --comment %[2]s -j ACCEPT\n", sp, tag)
	return b.String()
}

// Remove returns the shell script (run as root) that deletes every rule
// of the filter table whose comment holds tag: it lists them and deletes
// them, a few passes at most, until none is left, and fails if some are
// still there. A machine without iptables-save has none.
func Remove(tag string) string {
	return fmt.Sprintf(`command -v iptables-save >/dev/null || exit 0
for pass in 1 2 3 4 5; do
	rules=$(iptables-save -t filter | grep -F -e %[1]s | sed -e 's/^-A /-D /') || true
	[ -z "$rules" ] && exit 0
	printf '%%s\n' "$rules" | while read -r r; do eval "iptables -w -t filter $r" || true; done
done
echo "rules of %[2]s are still there after 5 passes" >&2; exit 1`, shellquote.Quote(tag), tag)
}
