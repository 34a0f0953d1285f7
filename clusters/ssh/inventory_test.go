package ssh

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestInventoryErrors loads each bad inventory of testdata/inventory and
// wants a one-line error naming the file, the line where one is known,
// and what is wrong.
func TestInventoryErrors(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"unknown-field.yaml", "unknown-field.yaml:4: field adress not found"},
		{"no-hosts.yaml", "no-hosts.yaml: names no host"},
		{"no-address.yaml", "no-address.yaml:4: host 2: no address"},
		{"dup-name.yaml", `dup-name.yaml:3: host 2: name "h1" is also host 1's`},
		{"bad-port.yaml", "bad-port.yaml:2: host 1: port 70000: want 1 to 65535"},
		{"bad-backend.yaml", `bad-backend.yaml: backends: no backend "mongo"`},
		{"backend-host.yaml", `backend-host.yaml: backends: redis: no host named "h9"`},
		{"bad-binary.yaml", `bad-binary.yaml:2: host 1: binaries: redis-server: "bin/redis-server" is not an absolute path`},
		{"key-and-agent.yaml", "key-and-agent.yaml:2: host 1: both key and agent"},
		{"relative-workdir.yaml", `relative-workdir.yaml: workdir "tmp": want an absolute path`},
		{"not-yaml.yaml", "not-yaml.yaml:"},
		{"wrong-type.yaml", "wrong-type.yaml:2: cannot unmarshal"},
		{"empty.yaml", "empty.yaml: empty"},
		{"missing.yaml", "missing.yaml: no such file or directory"},
		{"bad-client-address.yaml", `bad-client-address.yaml: client_addresses: entry 1 "10.0.0.300": want an IPv4 address or a CIDR block`},
		{"client-is-host.yaml", `client-is-host.yaml: client_addresses: entry 1 "10.0.0.0/31": 10.0.0.1 is named twice, or is a host's address`},
		{"client-block-too-big.yaml", `client-block-too-big.yaml: client_addresses: entry 1 "10.0.0.0/16": more than 256 addresses`},
	} {
		t.Run(tc.file, func(t *testing.T) {
			_, err := LoadInventory(filepath.Join("testdata", "inventory", tc.file))
			if err == nil {
				t.Fatalf("loaded, want an error with %q", tc.want)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
				t.Errorf("error %q, want one line with %q", msg, tc.want)
			}
		})
	}
}

// TestInventoryGood checks the defaults a good inventory's hosts get.
func TestInventoryGood(t *testing.T) {
	path := filepath.Join("testdata", "inventory", "good.yaml")
	inv, err := LoadInventory(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Hosts) != 3 {
		t.Fatalf("%d hosts, want 3", len(inv.Hosts))
	}
	h1, h2, h3 := inv.Hosts[0], inv.Hosts[1], inv.Hosts[2]
	if h1.Addr() != "10.0.0.1:22" || inv.UserOf(h1) != "locktest" || inv.SudoOf(h1) || h1.Workdir != "/var/tmp/lt" {
		t.Errorf("h1 = %+v, user %s: want the inventory's defaults", h1, inv.UserOf(h1))
	}
	if h2.Addr() != "10.0.0.2:2222" || inv.UserOf(h2) != "admin" || !inv.SudoOf(h2) {
		t.Errorf("h2 = %+v, user %s: want its own port, user and sudo", h2, inv.UserOf(h2))
	}
	if got := fmt.Sprint(inv.Clients); got != "[10.0.0.200 10.0.0.201 10.0.0.202 10.0.0.203 10.0.0.210]" {
		t.Errorf("client addresses %s, want the block's four and the one", got)
	}
	if h3.Name != "db3.example" || h3.Binary("redis-server") != "/opt/redis/bin/redis-server" || h1.Binary("redis-server") != "redis-server" {
		t.Errorf("h3 = %+v: want its address as its name and its binary", h3)
	}
	if want := filepath.Join("testdata", "inventory", "id_ed25519"); h1.Key != want || inv.KnownHosts != filepath.Join("testdata", "inventory", "known_hosts") {
		t.Errorf("key %q, known_hosts %q: want them next to the inventory", h1.Key, inv.KnownHosts)
	}
	if got := inv.HostsFor("redis"); len(got) != 2 || got[0].Name != "h2" || got[1].Name != "h1" {
		t.Errorf("redis hosts %+v, want h2, h1", got)
	}
	// A host named twice takes two nodes.
	if got := inv.HostsFor("redis-sentinel"); len(got) != 3 || got[0].Name != "h1" || got[1].Name != "h2" || got[2].Name != "h1" {
		t.Errorf("redis-sentinel hosts %+v, want h1, h2, h1", got)
	}
}

// TestHostsShortForm checks `--hosts a,b,c`.
func TestHostsShortForm(t *testing.T) {
	inv, err := HostsInventory("10.0.0.1, 10.0.0.2:2200,db3", "admin", "/k", "", "10.0.0.200/31, 10.0.0.9")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(inv.Clients); got != "[10.0.0.200 10.0.0.201 10.0.0.9]" {
		t.Errorf("--client-addresses gave %s", got)
	}
	if _, err := HostsInventory("10.0.0.1", "", "", "", "10.0.0.1"); err == nil || err.Error() != `--client-addresses: entry 1 "10.0.0.1": 10.0.0.1 is named twice, or is a host's address` {
		t.Errorf("a client address that is a host's: %v", err)
	}
	if len(inv.Hosts) != 3 || inv.Hosts[1].Addr() != "10.0.0.2:2200" || inv.Hosts[2].Addr() != "db3:22" || inv.UserOf(inv.Hosts[0]) != "admin" || inv.Hosts[0].Key != "/k" {
		t.Errorf("hosts %+v", inv.Hosts)
	}
	for _, tc := range []struct{ list, want string }{
		{"", "--hosts: entry 1: no address"},
		{"a,,b", "--hosts: entry 2: no address"},
		{"a,a", `--hosts: entry 2: name "a" is also host 1's`},
		{"a:ssh", `--hosts: entry 1 "a:ssh": port "ssh" is not a number`},
		{"root@a", `--hosts: entry 1: address "root@a"`},
	} {
		if _, err := HostsInventory(tc.list, "", "", "", ""); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--hosts %q: error %v, want %q", tc.list, err, tc.want)
		}
	}
}
