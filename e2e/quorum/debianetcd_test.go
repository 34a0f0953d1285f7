package quorum_test

import (
	"os/exec"
	"regexp"
	"testing"
	"time"

	"github.com/locktest/locktest/checker"
	"github.com/locktest/locktest/clusters"
	"github.com/locktest/locktest/clusters/local"
	"github.com/locktest/locktest/testkit"
	"github.com/locktest/locktest/testkit/gate"
)

// TestHostEtcdInPlaceOfTheEmbedded: --cluster-opt etcd=PATH makes the local
// provider run the host's etcd (Debian's etcd-server) in place of the etcd
// that locktest's node program embeds, and the run's results name that
// etcd's version, which `etcd --version` prints, and not the embedded one's.
// A power loss cannot be cut into the host's etcd, which records none of
// its syncs: the run says why.
func TestHostEtcdInPlaceOfTheEmbedded(t *testing.T) {
	gate.Need(t, "etcd")
	testkit.LocalOnly(t, "--cluster-opt etcd=PATH is the local provider's")
	path, _ := exec.LookPath("etcd")
	out, err := exec.Command(path, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v", path, err)
	}
	m := regexp.MustCompile(`etcd Version: (\S+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("%s --version printed no version: %s", path, out)
	}
	want := string(m[1])
	cfg := testkit.EtcdConfig(t, "etcd-mutex")
	cfg.ClusterParams = map[string]string{"etcd": path}
	cfg.Duration, cfg.Clients = 3*time.Second, 3
	res, _ := testkit.MustRun(t, cfg)
	if res.Results.Valid != checker.Valid {
		t.Errorf("verdict %s, want valid: %v", res.Results.Valid, res.Results.Run.Errors)
	}
	if got := res.Results.Run.Versions.Servers["etcd"]; got != want {
		t.Errorf("results name etcd %q, want %s, the version of %s", got, want, path)
	}

	cl, err := local.New("etcd", local.Options{Nodes: 3, Dir: t.TempDir(), TrackSyncs: true, Params: cfg.ClusterParams})
	if err != nil {
		t.Fatal(err)
	}
	if why := cl.(clusters.PowerCutter).PowerCutReason(); !regexp.MustCompile(`this host's etcd .*records nothing`).MatchString(why) {
		t.Errorf("power cut reason %q, want one saying the host's etcd records no syncs", why)
	}
}
