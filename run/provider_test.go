package run

import (
	"slices"
	"strings"
	"testing"

	"github.com/locktest/locktest/clusters/provider"
	"github.com/locktest/locktest/impls"
)

// TestProvidersComeFromTheRegistry: --provider's values, its help, the
// rows of the providers' settings and their checks all come from the
// registry: each provider is named in the help with where its nodes run,
// each of its settings is a row of the platform group, and another
// provider's setting is refused with the flags of its owner.
func TestProvidersComeFromTheRegistry(t *testing.T) {
	if len(Providers) == 0 || DefaultConfig().Provider != Providers[0] {
		t.Fatalf("Providers = %v, default %q", Providers, DefaultConfig().Provider)
	}
	for _, d := range provider.All() {
		if !strings.Contains(providersHelp(), d.Name+": "+d.Doc) {
			t.Errorf("--provider's help does not say where %s's nodes run: %s", d.Name, providersHelp())
		}
		for _, ps := range d.Settings {
			s, ok := SettingNamed(ps.Name)
			if !ok || s.Group != GroupPlatform || s.Doc != ps.Doc || s.Scenario {
				t.Errorf("provider %s's setting %s has no row of its own in the platform group: %+v", d.Name, ps.Name, s)
			}
		}
	}
	set := func(name, text string) Config {
		c := Config{Provider: Providers[0]}
		if err := c.Set(name, text); err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Provider: "vm"}, `--provider must be local, docker or ssh, got "vm"`},
		{set("image", "redis=x"), "--image needs --provider docker"},
		{set("hosts", "a"), "--inventory, --hosts, --ssh-user, --ssh-key, --known-hosts, --client-addresses and --insecure-ignore-host-key need --provider ssh"},
		{set("insecure-ignore-host-key", "true"), "need --provider ssh"},
	} {
		if err := c.cfg.validateProvider(impls.Impl{Backend: "redis"}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
	c := set("image", "redis=redis:7.2")
	c.Provider = "docker"
	if err := c.Set("image", "etcd=e"); err != nil {
		t.Fatal(err)
	}
	if got := c.Values()["image"]; got != "etcd=e" {
		t.Errorf("Set replaced --image with %q, want etcd=e", got)
	}
	if got := strings.Join(c.ProviderArgs(), " "); got != "--provider docker --image etcd=e" {
		t.Errorf("ProviderArgs = %q", got)
	}
	d := DefaultConfig()
	if v := d.Values(); v["insecure_ignore_host_key"] != "false" || v["image"] != "" || v["inventory"] != "" {
		t.Errorf("results of the defaults: %v", v)
	}
}

// TestMachineSettingsAreTheProvidersOwn: a schedule file records none of
// the settings that name this machine or its hosts, which each provider
// marks, and records the others (the docker provider's --image).
func TestMachineSettingsAreTheProvidersOwn(t *testing.T) {
	want := []string{"subnet", "inventory", "hosts", "ssh-user", "ssh-key", "known-hosts", "client-addresses", "insecure-ignore-host-key"}
	if strings.Join(machineSettings, " ") != strings.Join(want, " ") {
		t.Errorf("machineSettings = %v, want %v", machineSettings, want)
	}
	keys := WorkloadKeys()
	for _, k := range want {
		if slices.Contains(keys, k) {
			t.Errorf("a schedule records %s, which names this machine", k)
		}
	}
	if !slices.Contains(keys, "image") {
		t.Errorf("a schedule does not record --image: %v", keys)
	}
}

// TestParallelFollowsTheProvider: a series runs its runs side by side
// unless its provider's hosts take one run at a time, where it runs them
// one by one and refuses a --parallel above 1 that was given.
func TestParallelFollowsTheProvider(t *testing.T) {
	one := 0
	for _, d := range provider.All() {
		n, err := Parallel(d.Name, 3, false)
		switch {
		case err != nil:
			t.Errorf("%s: %v", d.Name, err)
		case d.OneRunAtATime && n != 1, !d.OneRunAtATime && n != 3:
			t.Errorf("%s (one run at a time: %v): %d runs at once", d.Name, d.OneRunAtATime, n)
		}
		_, err = Parallel(d.Name, 3, true)
		if want := "--parallel 3: the " + d.Name + " provider's hosts take one run at a time"; d.OneRunAtATime && (err == nil || err.Error() != want) {
			t.Errorf("%s: %v, want %q", d.Name, err, want)
		} else if !d.OneRunAtATime && err != nil {
			t.Errorf("%s: %v", d.Name, err)
		}
		if d.OneRunAtATime {
			one++
		}
	}
	if one == 0 {
		t.Error("no provider takes one run at a time: the test tests nothing")
	}
}
