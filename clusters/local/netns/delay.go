package netns

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// NetemAvailable reports whether the kernel has tc's netem qdisc, by adding
// one to a dummy link in a throw-away namespace; the error says why not.
func NetemAvailable(ctx context.Context) error {
	if _, err := exec.LookPath("tc"); err != nil {
		return errors.New("tc (iproute2) is missing")
	}
	if err := Check(); err != nil {
		return err
	}
	// The probe namespace is named like a lab's, with an owner file, so
	// `locktest cleanup` finds it if the driver dies during the probe.
	unlock, err := lockFile()
	if err != nil {
		return err
	}
	id, err := freeID(ctx)
	unlock()
	if err != nil {
		return err
	}
	ns := nsPrefix + id + "-probe"
	defer os.Remove(ownerDir + "/" + id)
	if err := run(ctx, "ip", "netns", "add", ns); err != nil {
		return err
	}
	defer run(context.Background(), "ip", "netns", "del", ns)
	if err := run(ctx, "ip", "-n", ns, "link", "set", "lo", "up"); err != nil {
		return err
	}
	if err := run(ctx, "ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"); err != nil {
		return fmt.Errorf("tc netem is missing from this kernel (%v)", lastLine(err))
	}
	return nil
}

func lastLine(err error) string {
	s := strings.TrimSpace(err.Error())
	if i := strings.LastIndex(s, ": "); i >= 0 {
		return s[i+2:]
	}
	return s
}

// Delay makes each of hosts hold every packet it sends for d with tc netem
// (see NetemAvailable), and removes the delay from every other host; d = 0
// removes them all.
func (l *Network) Delay(ctx context.Context, hosts []string, d time.Duration) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.lookup(hosts); err != nil {
		return err
	}
	var errs []error
	for _, name := range l.order {
		h := l.hosts[name]
		on := d > 0
		if on {
			on = false
			for _, x := range hosts {
				on = on || x == name
			}
		}
		if on {
			errs = append(errs, run(ctx, "ip", "netns", "exec", h.NS, "tc", "qdisc", "replace", "dev", "eth0", "root",
				"netem", "delay", fmt.Sprintf("%dus", d.Microseconds())))
		} else {
			_ = run(ctx, "ip", "netns", "exec", h.NS, "tc", "qdisc", "del", "dev", "eth0", "root")
		}
	}
	return errors.Join(errs...)
}
