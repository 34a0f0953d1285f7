package ssh

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/locktest/locktest/clusters/backend"
)

// DefaultWorkdir is where a host keeps the per-run directories when the
// inventory names no workdir.
const DefaultWorkdir = "/tmp/locktest-ssh"

// Inventory says which hosts the provider reaches and how. It is read from
// YAML (LoadInventory) or made from `--hosts a,b,c` (HostsInventory). The
// settings at its top are the defaults of every host.
type Inventory struct {
	// User logs in on every host that names no user of its own; default root.
	User string `yaml:"user"`
	// Port is the SSH port of every host that names none; default 22.
	Port int `yaml:"port"`
	// Key is the private key file; relative paths are relative to the
	// inventory file. Empty means the ssh-agent of SSH_AUTH_SOCK.
	Key string `yaml:"key"`
	// KnownHosts is the known_hosts file host keys are checked against;
	// default ~/.ssh/known_hosts.
	KnownHosts string `yaml:"known_hosts"`
	// Workdir holds each run's directory on every host that names none.
	Workdir string `yaml:"workdir"`
	// Sudo runs the commands that need root (faults) under sudo -n.
	Sudo bool `yaml:"sudo"`
	// Hosts are the hosts, in the order nodes are placed on them.
	Hosts []Host `yaml:"hosts"`
	// Backends names, per backend, the hosts that run its nodes (default:
	// every host, in order).
	Backends map[string][]string `yaml:"backends"`
	// ClientAddresses are addresses on the control host, one for each
	// client host the run has (c0 gets the first): IPv4 addresses or CIDR
	// blocks (every address of a block, at most 256 in all). With them
	// each client reaches the nodes from an address of its own, so a
	// partition can single out one client or put clients on different
	// sides (package clusters/clientaddr). An address the control host
	// lacks is added for the run and removed after; the hosts must route
	// it back to the control host (an address of their shared subnet
	// does).
	ClientAddresses []string `yaml:"client_addresses"`
	// Clients are ClientAddresses, expanded and checked.
	Clients []netip.Addr `yaml:"-"`

	// InsecureIgnoreHostKey skips the host key check. It is never read
	// from the file: only the --insecure-ignore-host-key flag sets it, and
	// the run's results record it.
	InsecureIgnoreHostKey bool `yaml:"-"`
	// Source is where the inventory came from, for errors.
	Source string `yaml:"-"`
}

// Host is one SSH host of the inventory.
type Host struct {
	// Name names the host in logs and results; default its address.
	Name string `yaml:"name"`
	// Address is the host's name or IP address, which the clients on the
	// control host also dial the nodes at.
	Address string `yaml:"address"`
	User    string `yaml:"user"`
	Port    int    `yaml:"port"`
	Key     string `yaml:"key"`
	// Agent authenticates with the ssh-agent instead of a key file.
	Agent   bool   `yaml:"agent"`
	Workdir string `yaml:"workdir"`
	// Sudo, when set, overrides the inventory's sudo for this host.
	Sudo *bool `yaml:"sudo"`
	// Binaries maps a program the provider runs (redis-server) to its
	// path on the host; a program not named is looked up on the host's PATH.
	Binaries map[string]string `yaml:"binaries"`

	line int
}

// UserOf returns the login user of h under inv's defaults.
func (inv *Inventory) UserOf(h Host) string {
	if h.User != "" {
		return h.User
	}
	return inv.User
}

// SudoOf reports whether fault commands on h run under sudo.
func (inv *Inventory) SudoOf(h Host) bool {
	if h.Sudo != nil {
		return *h.Sudo
	}
	return inv.Sudo
}

// Binary returns the path of program on h.
func (h Host) Binary(program string) string {
	if p := h.Binaries[program]; p != "" {
		return p
	}
	return program
}

// Addr returns h's SSH address, host:port.
func (h Host) Addr() string { return net.JoinHostPort(h.Address, strconv.Itoa(h.Port)) }

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// LoadInventory reads and checks the inventory file path. Unknown fields
// are errors; every error is one line naming the file and, where it can,
// the line.
func LoadInventory(path string) (*Inventory, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("inventory %s: %v", path, err)
	}
	return ParseInventory(data, path)
}

// ParseInventory parses an inventory from data; source names it in errors
// and relative key and known_hosts paths are relative to its directory.
func ParseInventory(data []byte, source string) (*Inventory, error) {
	inv := &Inventory{Source: source}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(inv); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("inventory %s: empty, want a mapping with hosts", source)
		}
		return nil, fmt.Errorf("inventory %s%s", source, yamlErr(err))
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err == nil {
		hostLines(&doc, inv)
	}
	dir := filepath.Dir(source)
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) || strings.HasPrefix(p, "~") {
			return p
		}
		return filepath.Join(dir, p)
	}
	inv.Key = abs(inv.Key)
	inv.KnownHosts = abs(inv.KnownHosts)
	for i := range inv.Hosts {
		inv.Hosts[i].Key = abs(inv.Hosts[i].Key)
	}
	if err := inv.check(); err != nil {
		return nil, err
	}
	return inv, nil
}

// yamlErr turns a YAML error into ":LINE: what", one line.
func yamlErr(err error) string {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "yaml: ")
	msg = strings.TrimPrefix(msg, "unmarshal errors:\n")
	msg = strings.TrimSpace(strings.SplitN(msg, "\n", 2)[0])
	if m := regexp.MustCompile(`^line (\d+): (.*)$`).FindStringSubmatch(msg); m != nil {
		return ":" + m[1] + ": " + m[2]
	}
	return ": " + msg
}

// hostLines records the line of each host's entry for later errors.
func hostLines(doc *yaml.Node, inv *Inventory) {
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return
	}
	m := doc.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value != "hosts" || m.Content[i+1].Kind != yaml.SequenceNode {
			continue
		}
		for j, h := range m.Content[i+1].Content {
			if j < len(inv.Hosts) {
				inv.Hosts[j].line = h.Line
			}
		}
	}
}

// HostsInventory makes the inventory of `--hosts a,b,c`: every host with
// the same user, key (or the ssh-agent when key is empty) and known_hosts.
// An entry may be host or host:port. clientAddrs is `--client-addresses`,
// the client_addresses comma-separated.
func HostsInventory(list, user, key, knownHosts, clientAddrs string) (*Inventory, error) {
	inv := &Inventory{Source: "--hosts", User: user, Key: key, KnownHosts: knownHosts}
	for a := range strings.SplitSeq(clientAddrs, ",") {
		if a = strings.TrimSpace(a); a != "" {
			inv.ClientAddresses = append(inv.ClientAddresses, a)
		}
	}
	for i, a := range strings.Split(list, ",") {
		a = strings.TrimSpace(a)
		h := Host{Address: a, line: i + 1}
		if host, port, err := net.SplitHostPort(a); err == nil {
			p, perr := strconv.Atoi(port)
			if perr != nil {
				return nil, fmt.Errorf("--hosts: entry %d %q: port %q is not a number", i+1, a, port)
			}
			h.Address, h.Port = host, p
		}
		inv.Hosts = append(inv.Hosts, h)
	}
	if err := inv.check(); err != nil {
		return nil, err
	}
	return inv, nil
}

// where names host i for errors.
func (inv *Inventory) where(i int) string {
	if inv.Source == "--hosts" {
		return fmt.Sprintf("--hosts: entry %d", i+1)
	}
	if l := inv.Hosts[i].line; l > 0 {
		return fmt.Sprintf("inventory %s:%d: host %d", inv.Source, l, i+1)
	}
	return fmt.Sprintf("inventory %s: host %d", inv.Source, i+1)
}

// check fills the defaults and rejects what cannot work.
func (inv *Inventory) check() error {
	if len(inv.Hosts) == 0 {
		if inv.Source == "--hosts" {
			return errors.New("--hosts: names no host")
		}
		return fmt.Errorf("inventory %s: names no host (want a list under hosts:)", inv.Source)
	}
	if inv.User == "" {
		inv.User = "root"
	}
	if inv.Port == 0 {
		inv.Port = 22
	}
	if inv.Port < 1 || inv.Port > 65535 {
		return fmt.Errorf("inventory %s: port %d: want 1 to 65535", inv.Source, inv.Port)
	}
	if inv.Workdir == "" {
		inv.Workdir = DefaultWorkdir
	}
	if !filepath.IsAbs(inv.Workdir) {
		return fmt.Errorf("inventory %s: workdir %q: want an absolute path on the hosts", inv.Source, inv.Workdir)
	}
	names := map[string]int{}
	for i := range inv.Hosts {
		h := &inv.Hosts[i]
		if h.Address == "" {
			return fmt.Errorf("%s: no address", inv.where(i))
		}
		if strings.ContainsAny(h.Address, " /@") {
			return fmt.Errorf("%s: address %q: want a host name or an IP address", inv.where(i), h.Address)
		}
		if h.Name == "" {
			h.Name = h.Address
		}
		if !nameRE.MatchString(h.Name) {
			return fmt.Errorf("%s: name %q: want letters, digits, '.', '_' or '-'", inv.where(i), h.Name)
		}
		if j, dup := names[h.Name]; dup {
			return fmt.Errorf("%s: name %q is also host %d's", inv.where(i), h.Name, j+1)
		}
		names[h.Name] = i
		if h.Port == 0 {
			h.Port = inv.Port
		}
		if h.Port < 1 || h.Port > 65535 {
			return fmt.Errorf("%s: port %d: want 1 to 65535", inv.where(i), h.Port)
		}
		if h.Key == "" && !h.Agent {
			h.Key = inv.Key
		}
		if h.Agent && h.Key != "" {
			return fmt.Errorf("%s: both key and agent: name one", inv.where(i))
		}
		if h.Workdir == "" {
			h.Workdir = inv.Workdir
		}
		if !filepath.IsAbs(h.Workdir) {
			return fmt.Errorf("%s: workdir %q: want an absolute path on the host", inv.where(i), h.Workdir)
		}
		for prog, p := range h.Binaries {
			if !slices.Contains(Programs, prog) {
				return fmt.Errorf("%s: binaries: no program %q (the provider runs %s)", inv.where(i), prog, strings.Join(Programs, ", "))
			}
			if !filepath.IsAbs(p) {
				return fmt.Errorf("%s: binaries: %s: %q is not an absolute path", inv.where(i), prog, p)
			}
		}
	}
	if err := inv.checkClients(); err != nil {
		return err
	}
	for b, hs := range inv.Backends {
		if !slices.Contains(backend.All(), b) {
			return fmt.Errorf("inventory %s: backends: no backend %q (there are %s)", inv.Source, b, strings.Join(backend.All(), ", "))
		}
		if len(hs) == 0 {
			return fmt.Errorf("inventory %s: backends: %s names no host", inv.Source, b)
		}
		for _, n := range hs {
			if _, ok := names[n]; !ok {
				return fmt.Errorf("inventory %s: backends: %s: no host named %q", inv.Source, b, n)
			}
		}
	}
	return nil
}

// maxClientAddresses bounds what the client_addresses may expand to.
const maxClientAddresses = 256

// checkClients expands ClientAddresses into Clients.
func (inv *Inventory) checkClients() error {
	inv.Clients = nil
	where := "inventory " + inv.Source + ": client_addresses"
	if inv.Source == "--hosts" {
		where = "--client-addresses"
	}
	seen := map[netip.Addr]bool{}
	for _, h := range inv.Hosts {
		if a, err := netip.ParseAddr(h.Address); err == nil {
			seen[a] = true // a host's own address is not a client's
		}
	}
	for i, e := range inv.ClientAddresses {
		var block []netip.Addr
		if p, err := netip.ParsePrefix(strings.TrimSpace(e)); err == nil && p.Addr().Is4() {
			p = p.Masked()
			if p.Bits() < 32-8 {
				return fmt.Errorf("%s: entry %d %q: more than %d addresses", where, i+1, e, maxClientAddresses)
			}
			for a := p.Addr(); p.Contains(a); a = a.Next() {
				block = append(block, a)
			}
		} else if a, err := netip.ParseAddr(strings.TrimSpace(e)); err == nil && a.Is4() {
			block = []netip.Addr{a}
		} else {
			return fmt.Errorf("%s: entry %d %q: want an IPv4 address or a CIDR block (10.0.0.200/29)", where, i+1, e)
		}
		for _, a := range block {
			if seen[a] {
				return fmt.Errorf("%s: entry %d %q: %v is named twice, or is a host's address", where, i+1, e, a)
			}
			seen[a] = true
			inv.Clients = append(inv.Clients, a)
		}
		if len(inv.Clients) > maxClientAddresses {
			return fmt.Errorf("%s: more than %d addresses", where, maxClientAddresses)
		}
	}
	return nil
}

// HostsFor returns the hosts that run backend's nodes, in order.
func (inv *Inventory) HostsFor(backend string) []Host {
	names, ok := inv.Backends[backend]
	if !ok {
		return slices.Clone(inv.Hosts)
	}
	var out []Host
	for _, n := range names {
		for _, h := range inv.Hosts {
			if h.Name == n {
				out = append(out, h)
			}
		}
	}
	return out
}
