// Package sshlab is the SSH lab (`locktest lab up`): containers running
// sshd on a Docker network of their own, which the ssh provider
// (clusters/ssh) and its tests use as hosts. Its image is built, as the
// docker provider's are (clusters/images), from this host's installed
// packages without pulling anything. Lab objects carry the lab's labels
// ([Label], [LabelDir]) and no owner pid: a lab outlives the command that
// made it, so `locktest cleanup` leaves it alone and `locktest lab down`
// removes it.
package sshlab

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	xssh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/locktest/locktest/clusters/engine"
	"github.com/locktest/locktest/clusters/images"
)

// Label holds the id of the SSH lab (`locktest lab up`) a container
// or network belongs to. Lab objects carry no owner pid: a lab outlives
// the command that made it, so `locktest cleanup` leaves it alone and
// `locktest lab down` removes it.
const Label = "locktest.sshlab"

// LabelDir holds the absolute folder an SSH lab wrote its inventory
// into; `locktest lab down --dir` removes the lab of that folder.
const LabelDir = "locktest.sshlab-dir"

// subnetBase is the first two octets of the /24 a lab picks; runs use
// 10.78, the local provider's namespaces 10.77.
var subnetBase = [2]byte{10, 79}

// Backend is the name the lab's image is built under
// (locktest/sshlab:host).
const Backend = "sshlab"

// The files an SSH lab writes into its directory.
const (
	Inventory  = "lab.yaml"
	Key        = "id_ed25519"
	KnownHosts = "known_hosts"
)

// labPrograms are the host programs the lab's image holds besides
// sshd: the servers the provider starts, the iptables of its network
// faults, and the tools of the provider's shell commands.
var labPrograms = []string{"sh", "redis-server", "iptables", "iptables-save", "iptables-restore",
	"cat", "mkdir", "rm", "chmod", "mv", "sleep", "awk", "grep", "sed", "ls", "tail", "env", "setsid"}

// sshdConfig is the lab hosts' sshd configuration: root logs in with the
// lab's key only, and sessions get a PATH that holds iptables.
const sshdConfig = `# Written by locktest lab up.
Port 22
HostKey /etc/ssh/ssh_host_ed25519_key
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
MaxSessions 100
MaxStartups 100
PidFile /run/sshd.pid
SetEnv PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
Subsystem sftp /usr/lib/openssh/sftp-server
`

// Rootfs assembles the lab's image: this host's sshd (Debian's
// openssh-server), redis-server, iptables and a few tools, with their
// libraries, an sshd configuration and the users sshd needs; and, when
// this host has them, its Java runtime and Debian's ZooKeeper jars, as in
// the zookeeper image, and its MariaDB and PostgreSQL servers
// (addLabSQL), and the servers locktest builds itself that this host has
// built (images.AddBuiltPrograms).
func Rootfs(ctx context.Context) (*images.Rootfs, error) {
	r := images.BaseRootfs()
	r.AddFile("/etc/passwd", []byte("root:x:0:0:root:/root:/bin/sh\nsshd:x:100:65534::/run/sshd:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"), 0o644)
	r.AddFile("/etc/ssh/sshd_config", []byte(sshdConfig), 0o644)
	r.AddDir("/run/sshd", 0o755)
	r.AddDir(path.Join("/root", ".ssh"), 0o700)
	r.AddDir("/var/tmp", fs.ModeSticky|0o777)
	if _, err := exec.LookPath("sshd"); err != nil {
		return nil, errors.New("lab: sshd is not installed on this host: run `make setup` (installs openssh-server)")
	}
	if err := images.AddHostPrograms(ctx, r, "lab", "", append([]string{"sshd"}, labPrograms...)); err != nil {
		return nil, err
	}
	// root's login shell, by the path /etc/passwd gives (a link to
	// usr/bin on a merged /usr).
	if err := r.AddPath("/bin/sh"); err != nil {
		return nil, err
	}
	// iptables loads its matches (comment, statistic) as modules.
	for _, dir := range []string{"/usr/lib/x86_64-linux-gnu/xtables", "/usr/lib/aarch64-linux-gnu/xtables", "/usr/lib/xtables"} {
		if _, err := os.Stat(dir); err == nil {
			if err := r.AddPath(dir); err != nil {
				return nil, err
			}
		}
	}
	// ZooKeeper, when this host has it: a lab of a host without Java
	// runs Redis and etcd only, and the provider says a host lacks java.
	if err := images.AddZooKeeper(ctx, r); err != nil && !errors.Is(err, images.ErrNoJava) && !errors.Is(err, images.ErrNoZooKeeperJars) {
		return nil, err
	}
	// The servers locktest builds itself (kube-apiserver), each when
	// this host has built it.
	if _, err := images.AddBuiltPrograms(ctx, r); err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	// MariaDB and PostgreSQL, each when this host has it.
	if _, err := addLabSQL(ctx, r); err != nil {
		return nil, err
	}
	if _, err := os.Stat("/usr/lib/openssh/sftp-server"); err == nil {
		if err := r.AddPath("/usr/lib/openssh/sftp-server"); err != nil {
			return nil, err
		}
		if _, err := r.AddLibs(ctx, "/usr/lib/openssh/sftp-server"); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Options says what Up makes.
type Options struct {
	// Hosts is the number of SSH hosts; at least 5.
	Hosts int
	// Dir receives the lab's inventory, key and known_hosts.
	Dir string
}

// Check refuses options no lab can be made of, naming the flag of
// `locktest lab up`: a host count outside 5 to 100, no folder, or a
// folder that holds a lab's inventory already. It makes nothing.
func (o Options) Check() error {
	if o.Hosts < 5 || o.Hosts > 100 {
		return fmt.Errorf("--count %d: want 5 to 100", o.Hosts)
	}
	if o.Dir == "" {
		return errors.New("--dir: no folder for the inventory")
	}
	if _, err := os.Stat(filepath.Join(o.Dir, Inventory)); err == nil {
		return fmt.Errorf("--dir %s holds a lab's %s already: `locktest lab down --dir %s` first", o.Dir, Inventory, o.Dir)
	}
	return nil
}

// Lab is an SSH lab that Up made.
type Lab struct {
	ID        string
	Network   string
	Subnet    string
	Inventory string   // path of the inventory written
	Hosts     []string // the hosts' addresses, h1 first
	Image     string
}

// Up starts, on the engine e, opts.Hosts containers of locktest's SSH
// image (built if needed) on a Docker network of their own, each with
// NET_ADMIN for iptables, a host key of its own and the lab's client key
// authorized for root; it writes the key, a known_hosts file and an
// inventory into opts.Dir. A failure removes whatever it had made.
func Up(ctx context.Context, e *engine.Engine, opts Options) (lab *Lab, err error) {
	if err := opts.Check(); err != nil {
		return nil, fmt.Errorf("lab up: %w", err)
	}
	rc, err := Rootfs(ctx)
	if err != nil {
		return nil, err
	}
	img, err := images.BuildOne(ctx, e, Backend, &images.Recipe{Rootfs: rc, Tag: "host", Changes: []string{`CMD ["/usr/sbin/sshd", "-D", "-e"]`}}, false)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("lab up: %v", err)
	}
	b := make([]byte, 4)
	rand.Read(b)
	id := hex.EncodeToString(b)
	lab = &Lab{ID: id, Network: "locktest-sshlab-" + id, Image: img.Ref}
	defer func() {
		if err != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			if rerr := e.RemoveByLabel(rctx, Label, id); rerr != nil {
				e.Logger().Error("lab up: remove after failure", "err", rerr)
			}
			removeLabFiles(opts.Dir)
			lab = nil
		}
	}()
	absDir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return lab, err
	}
	labels := map[string]string{Label: id, LabelDir: absDir}
	_, subnet, err := e.CreateNetwork(ctx, lab.Network, subnetBase, labels)
	if err != nil {
		return lab, err
	}
	lab.Subnet = subnet.String()
	clientPub, clientPEM, err := newKey()
	if err != nil {
		return lab, err
	}
	var known, inv strings.Builder
	inv.WriteString("# Written by locktest lab up: the lab's SSH hosts, containers on the Docker network " + lab.Network + ".\n")
	inv.WriteString("user: root\nkey: " + Key + "\nknown_hosts: " + KnownHosts + "\n")
	// The clients' own addresses: the top of the lab's /24, which the
	// hosts (from .2 up) never reach; the control host answers ARP for
	// them on the lab's bridge.
	inv.WriteString("# One address per client on this host (added for a run and removed after), so a cut can single out a client.\n")
	inv.WriteString("client_addresses: [" + labClients(subnet).String() + "]\nhosts:\n")
	ip := subnet.Addr().Next().Next() // .1 is the gateway
	for i := range opts.Hosts {
		name := fmt.Sprintf("h%d", i+1)
		hostPub, hostPEM, err := newKey()
		if err != nil {
			return lab, err
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		ctr, err := e.Client().ContainerCreate(cctx, client.ContainerCreateOptions{
			Name:   lab.Network + "-" + name,
			Config: &container.Config{Image: img.Ref, Hostname: name, Labels: labels, Cmd: []string{"/usr/sbin/sshd", "-D", "-e"}},
			HostConfig: &container.HostConfig{NetworkMode: container.NetworkMode(lab.Network), CapAdd: []string{"NET_ADMIN"},
				Tmpfs: map[string]string{"/tmp": "rw,exec,mode=1777"}},
			NetworkingConfig: &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
				lab.Network: {IPAMConfig: &network.EndpointIPAMConfig{IPv4Address: ip}}}},
		})
		cancel()
		if err != nil {
			return lab, fmt.Errorf("lab up: create %s: %s", name, engine.FirstLine(err))
		}
		files := []tarFile{
			{"etc/ssh/ssh_host_ed25519_key", hostPEM, 0o600},
			{"etc/ssh/ssh_host_ed25519_key.pub", xssh.MarshalAuthorizedKey(hostPub), 0o644},
			{"root/.ssh/authorized_keys", xssh.MarshalAuthorizedKey(clientPub), 0o600},
		}
		if _, err := e.Client().CopyToContainer(ctx, ctr.ID, client.CopyToContainerOptions{DestinationPath: "/", Content: tarOf(files)}); err != nil {
			return lab, fmt.Errorf("lab up: copy keys into %s: %s", name, engine.FirstLine(err))
		}
		if _, err := e.Client().ContainerStart(ctx, ctr.ID, client.ContainerStartOptions{}); err != nil {
			return lab, fmt.Errorf("lab up: start %s: %s", name, engine.FirstLine(err))
		}
		known.WriteString(knownhosts.Line([]string{ip.String()}, hostPub) + "\n")
		fmt.Fprintf(&inv, "  - name: %s\n    address: %s\n", name, ip)
		lab.Hosts = append(lab.Hosts, ip.String())
		ip = ip.Next()
	}
	for _, h := range lab.Hosts {
		if err := waitSSH(ctx, h); err != nil {
			return lab, err
		}
	}
	if err := os.WriteFile(filepath.Join(opts.Dir, Key), clientPEM, 0o600); err != nil {
		return lab, fmt.Errorf("lab up: %v", err)
	}
	if err := os.WriteFile(filepath.Join(opts.Dir, KnownHosts), []byte(known.String()), 0o644); err != nil {
		return lab, fmt.Errorf("lab up: %v", err)
	}
	lab.Inventory = filepath.Join(opts.Dir, Inventory)
	if err := os.WriteFile(lab.Inventory, []byte(inv.String()), 0o644); err != nil {
		return lab, fmt.Errorf("lab up: %v", err)
	}
	e.Logger().Info("ssh lab up", "lab", id, "network", lab.Network, "subnet", lab.Subnet, "hosts", len(lab.Hosts), "inventory", lab.Inventory)
	return lab, nil
}

// Down removes, on the engine e, the containers and network of the SSH
// lab that wrote its files into dir, and those files. It returns the ids
// of the labs it removed.
func Down(ctx context.Context, e *engine.Engine, dir string) ([]string, error) {
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	ids, err := labIDs(ctx, e, absDir)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, id := range ids {
		if err := e.RemoveByLabel(ctx, Label, id); err != nil {
			errs = append(errs, err)
		}
	}
	removeLabFiles(dir)
	return ids, errors.Join(errs...)
}

// Remove removes, on the engine e, the containers and network of the lab
// id.
func Remove(ctx context.Context, e *engine.Engine, id string) error {
	return e.RemoveByLabel(ctx, Label, id)
}

// IDs returns the ids of the SSH labs whose containers or networks exist
// on the engine e.
func IDs(ctx context.Context, e *engine.Engine) ([]string, error) { return labIDs(ctx, e, "") }

// labIDs returns the ids of the SSH labs whose containers or networks
// exist, only those of folder dir unless it is empty.
func labIDs(ctx context.Context, e *engine.Engine, dir string) ([]string, error) {
	f := client.Filters{}.Add("label", Label)
	if dir != "" {
		f = f.Add("label", LabelDir+"="+dir)
	}
	seen := map[string]bool{}
	var ids []string
	cs, err := e.Client().ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("docker: list lab containers: %s", engine.FirstLine(err))
	}
	for _, c := range cs.Items {
		if id := c.Labels[Label]; !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	ns, err := e.Client().NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("docker: list lab networks: %s", engine.FirstLine(err))
	}
	for _, n := range ns.Items {
		if id := n.Labels[Label]; !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// removeLabFiles removes the files Up writes into dir.
func removeLabFiles(dir string) {
	for _, f := range []string{Inventory, Key, KnownHosts} {
		os.Remove(filepath.Join(dir, f))
	}
}

// labClients is the block of a lab's subnet its inventory gives the
// clients: .192/27, 32 addresses.
func labClients(subnet netip.Prefix) netip.Prefix {
	a := subnet.Addr().As4()
	a[3] = 192
	return netip.PrefixFrom(netip.AddrFrom4(a), 27)
}

// newKey makes an ed25519 key pair: the public key and the private key in
// OpenSSH's PEM format.
func newKey() (xssh.PublicKey, []byte, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	blk, err := xssh.MarshalPrivateKey(priv, "locktest lab")
	if err != nil {
		return nil, nil, err
	}
	sp, err := xssh.NewPublicKey(pub)
	if err != nil {
		return nil, nil, err
	}
	return sp, pem.EncodeToMemory(blk), nil
}

type tarFile struct {
	name string
	data []byte
	mode int64
}

// tarOf returns a tar stream of files, owned by root.
func tarOf(files []tarFile) *bytes.Reader {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), Typeflag: tar.TypeReg, ModTime: time.Now()})
		tw.Write(f.data)
	}
	tw.Close()
	return bytes.NewReader(buf.Bytes())
}

// sshWait bounds the wait for a lab host's sshd to answer.
const sshWait = 30 * time.Second

// waitSSH waits until the sshd at ip:22 sends its banner.
func waitSSH(ctx context.Context, ip string) error {
	deadline := time.Now().Add(sshWait)
	var last error
	for time.Now().Before(deadline) {
		d := net.Dialer{Timeout: time.Second}
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(ip, "22"))
		if err == nil {
			c.SetDeadline(time.Now().Add(2 * time.Second))
			b := make([]byte, 4)
			_, err = io.ReadFull(c, b)
			c.Close()
			if err == nil && string(b) == "SSH-" {
				return nil
			}
			if err == nil {
				err = fmt.Errorf("answered %q, not an SSH banner", b)
			}
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("lab up: sshd at %s not answering after %v: %v", ip, sshWait, last)
}
