package reports

import (
	"strings"
	"testing"

	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/runstore"
)

// TestAFaultThatNeverAppliesIsAProblem: one fault of two failed every
// injection; the run did not test what it asked for.
func TestAFaultThatNeverAppliesIsAProblem(t *testing.T) {
	h := hist(
		history.Op{Type: history.Invoke, Process: 1, F: history.Acquire, Time: ms(1)},
		history.Op{Type: history.OK, Process: 1, F: history.Acquire, Time: ms(2)},
		history.Op{Type: history.Invoke, Process: -1, F: "pause-node", Time: ms(10)},
		history.Op{Type: history.OK, Process: -1, F: "pause-node", Time: ms(11)},
		history.Op{Type: history.Invoke, Process: -1, F: "partition", Time: ms(20)},
		history.Op{Type: history.Info, Process: -1, F: "partition", Time: ms(21), Error: "netns: no host n9"},
		history.Op{Type: history.Invoke, Process: -1, F: "partition-isolate", Time: ms(30)},
		history.Op{Type: history.OK, Process: -1, F: "partition-isolate", Time: ms(31)},
	)
	r := check(runstore.RunInfo{Faults: []string{"pause-node", "partition", "isolate", "kill-node"}}, h, nil)
	got := strings.Join(r.Problems, "\n")
	if !strings.Contains(got, "fault partition was tried but never applied") {
		t.Errorf("problems %q do not name the partition", got)
	}
	for _, f := range []string{"pause-node", "isolate", "kill-node"} {
		if strings.Contains(got, "fault "+f+" ") {
			t.Errorf("problems %q name %s, which applied (or was never tried)", got, f)
		}
	}
	if r.Valid != "unknown" {
		t.Errorf("verdict %s, want unknown", r.Valid)
	}
}
