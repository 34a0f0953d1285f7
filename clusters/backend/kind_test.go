package backend

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// placeAll places the nodes of backend's default layout as a provider
// whose hosts are 10.0.0.1.. (one node each) would: each node at the
// first ports of its kind, in /w/<node>, its log there, under locktest's
// node program when withNodeProgram.
func placeAll(t *testing.T, backend string, params map[string]string, withNodeProgram bool) (*Layout, []Placement) {
	t.Helper()
	l, err := NewLayout(backend, 0, params)
	if err != nil {
		t.Fatal(err)
	}
	var peers []Placed
	for i, n := range l.Nodes {
		k, err := KindOf(n.Kind)
		if err != nil {
			t.Fatal(err)
		}
		p := Placed{Name: n.Name, IP: fmt.Sprintf("10.0.0.%d", i+1)}
		for _, port := range k.Ports {
			p.Ports = append(p.Ports, port.At(0))
		}
		peers = append(peers, p)
	}
	var out []Placement
	for i, n := range l.Nodes {
		k := Kinds()[n.Kind]
		dir := "/w/" + n.Name
		p := Placement{Layout: &l, Node: peers[i], Peers: peers, Bind: "0.0.0.0", Dir: dir, DataDir: dir + "/data",
			Bin:       func(program string) string { return "/usr/bin/" + program },
			ClassPath: ZooKeeperClassPath(DebianJarDir), Persistence: PersistenceEverysec, Header: "Written by locktest for node " + n.Name + ".",
			User: "root", Socket: dir + "/mariadb.sock", SocketDir: dir}
		if !k.Stdout {
			p.LogFile = dir + "/" + k.Log
		}
		if withNodeProgram {
			p.NodeProgram = []string{"/w/locktest-node"}
		}
		out = append(out, p)
	}
	return &l, out
}

// render writes a launch as the golden files hold it: the directories,
// each file with its path (and "once" when only the first start writes
// it), then the command line, one argument a line.
func render(b *strings.Builder, node string, l Launch) {
	fmt.Fprintf(b, "=== %s\n", node)
	for _, d := range l.Dirs {
		fmt.Fprintf(b, "dir %s\n", d)
	}
	for _, f := range l.Files {
		once := ""
		if f.Once {
			once = " (once)"
		}
		fmt.Fprintf(b, "--- file %s%s\n%s", f.Path, once, f.Data)
	}
	for _, n := range l.Needs {
		fmt.Fprintf(b, "needs %s\n", n)
	}
	if i := l.Init; i != nil {
		fmt.Fprintf(b, "--- init unless %s exists, with %q\n", i.Done, i.Env)
		for _, a := range i.Argv {
			fmt.Fprintf(b, "  %s\n", a)
		}
		for _, f := range i.Append {
			fmt.Fprintf(b, "--- then append to %s\n%s", f.Path, f.Data)
		}
	}
	b.WriteString("--- argv\n")
	for _, a := range l.Argv {
		fmt.Fprintf(b, "  %s\n", a)
	}
}

// TestLaunchesGolden: the launch of every node of each backend, as the
// providers that start it from its kind start it, is the one in
// testdata/launch-<backend>.golden (UPDATE_GOLDEN=1 rewrites them).
func TestLaunchesGolden(t *testing.T) {
	for _, tc := range []struct {
		backend     string
		params      map[string]string
		nodeProgram bool
	}{
		{Redis, nil, false},
		{RedisSentinel, map[string]string{"down-after": "300ms"}, false},
		{RedisCluster, nil, false},
		{Etcd, map[string]string{EtcdParamTickMs: "50", EtcdParamElectionMs: "500"}, true},
		{ZooKeeper, nil, false},
		{MySQL, nil, false},
		{Postgres, nil, false},
		{Nats, map[string]string{NatsParamSync: "always"}, true},
	} {
		t.Run(tc.backend, func(t *testing.T) {
			l, ps := placeAll(t, tc.backend, tc.params, tc.nodeProgram)
			var b strings.Builder
			for i, p := range ps {
				launch, err := Kinds()[l.Nodes[i].Kind].Launch(p)
				if err != nil {
					t.Fatal(err)
				}
				render(&b, l.Nodes[i].Name, launch)
			}
			matchGolden(t, "launches", "launch-"+tc.backend+".golden", b.String())
		})
	}
}

// TestUpstreamEtcdLaunch: without locktest's node program (an image of
// the upstream etcd), a member runs the etcd binary with its own flags,
// advertising the addresses it listens on, with the same timing.
func TestUpstreamEtcdLaunch(t *testing.T) {
	l, ps := placeAll(t, Etcd, map[string]string{EtcdParamTickMs: "50", EtcdParamElectionMs: "500"}, false)
	launch, err := Kinds()[KindEtcd].Launch(ps[1])
	if err != nil {
		t.Fatal(err)
	}
	argv := strings.Join(launch.Argv, " ")
	for _, w := range []string{"/usr/bin/etcd ", "--advertise-client-urls http://10.0.0.2:2379", "--initial-advertise-peer-urls http://10.0.0.2:2380",
		"--initial-cluster n1=http://10.0.0.1:2380,n2=http://10.0.0.2:2380,n3=http://10.0.0.3:2380", "--heartbeat-interval 50", "--election-timeout 500"} {
		if !strings.Contains(argv, w) {
			t.Errorf("%s's command line lacks %q: %s", l.Nodes[1].Name, w, argv)
		}
	}
}

// TestEveryKindIsDefined: every kind a layout gives its nodes has a
// definition with a client port, a program, a log and a launch, and a
// kind that does not exist is an error naming those that do.
func TestEveryKindIsDefined(t *testing.T) {
	for _, b := range All() {
		l, err := NewLayout(b, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range l.Nodes {
			k, err := KindOf(n.Kind)
			if err != nil {
				t.Fatalf("%s: %v", b, err)
			}
			if len(k.Ports) == 0 || k.Program == "" || k.Log == "" || k.Launch == nil || k.ReadyTimeout <= 0 {
				t.Errorf("%s: kind %s is missing a part: %+v", b, n.Kind, k)
			}
		}
	}
	if _, err := KindOf("consul"); err == nil || !strings.Contains(err.Error(), `"consul"`) {
		t.Errorf("KindOf(consul) = %v", err)
	}
}

// An init rendered as shell (Init.Shell) runs once: it makes the data
// directory and appends its text to the files it made; a second run finds
// the done-file and runs nothing; a failing init prints its program and
// its log's last line and exits 1.
func TestInitShellRunsOnceAndSaysWhyItFailed(t *testing.T) {
	dir := t.TempDir()
	data, logf := filepath.Join(dir, "data"), filepath.Join(dir, "init.log")
	in := &Init{Done: "PG_VERSION", Env: []string{"WHO=initdb"},
		Argv:   []string{"sh", "-c", `mkdir -p "$0" && echo "$WHO ran" && echo 15 > "$0/PG_VERSION" && echo "local all all trust" > "$0/hba.conf"`, data},
		Append: []File{{Path: filepath.Join(data, "hba.conf"), Data: "host all all 0.0.0.0/0 trust\n"}}}
	sh := func(line string) (string, error) {
		out, err := exec.Command("sh", "-c", line).CombinedOutput()
		return string(out), err
	}
	for range 2 {
		if out, err := sh(in.Shell(data, nil, logf)); err != nil {
			t.Fatalf("init: %v: %s", err, out)
		}
	}
	hba, _ := os.ReadFile(filepath.Join(data, "hba.conf"))
	if string(hba) != "local all all trust\nhost all all 0.0.0.0/0 trust\n" {
		t.Errorf("hba.conf after two starts = %q, want the init's line and the appended one, once", hba)
	}
	if log, _ := os.ReadFile(logf); string(log) != "initdb ran\n" {
		t.Errorf("init.log = %q, want one run with its environment", log)
	}
	bad := &Init{Done: "PG_VERSION", Argv: []string{"/bin/sh", "-c", "echo first; echo 'initdb: directory exists'; exit 3"}}
	out, err := sh(bad.Shell(filepath.Join(dir, "other"), nil, logf))
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || strings.TrimSpace(out) != "sh failed: initdb: directory exists" {
		t.Errorf("a failing init: %v, %q; want exit 1 and its program with its log's last line", err, out)
	}
}

// A kind's Programs are the host programs its launches run (those of an
// upstream server when there is no node program included), each declared
// once, and the kind of every backend's data nodes says how the docker
// provider gets its image: an official one, or a root file system
// locktest assembles, or locktest's node program.
func TestKindsDeclareTheirProgramsAndImage(t *testing.T) {
	asked := map[string][]string{}
	for _, b := range All() {
		for _, withNodeProgram := range []bool{true, false} {
			l, ps := placeAll(t, b, nil, withNodeProgram)
			for i, p := range ps {
				kind := l.Nodes[i].Kind
				p.Bin = func(program string) string {
					if !slices.Contains(asked[kind], program) {
						asked[kind] = append(asked[kind], program)
					}
					return program
				}
				if _, err := Kinds()[kind].Launch(p); err != nil && (withNodeProgram || Kinds()[kind].Program != NodeProgram) {
					t.Fatalf("%s node %s: %v", b, p.Node.Name, err)
				}
			}
		}
		s, _ := ServiceOf(b)
		k := Kinds()[s.Kind]
		if k.Program != NodeProgram && k.Image.Rootfs == 0 {
			t.Errorf("%s: kind %s says nothing of how its image is assembled (Image.Rootfs)", b, k.Name)
		}
		if k.Program == NodeProgram && k.Image.Rootfs != 0 {
			t.Errorf("%s: kind %s runs in locktest's node program, whose image holds that alone, yet names Image.Rootfs", b, k.Name)
		}
	}
	for name, k := range Kinds() {
		var declared []string
		for _, p := range k.Programs {
			declared = append(declared, p.Name)
		}
		if !slices.Equal(slices.Sorted(slices.Values(declared)), slices.Sorted(slices.Values(asked[name]))) {
			t.Errorf("kind %s declares the programs %q, its launches run %q", name, declared, asked[name])
		}
	}
}
