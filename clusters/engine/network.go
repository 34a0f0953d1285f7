package engine

import (
	"context"
	"crypto/rand"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
)

// CreateNetwork creates a bridge network called name, labelled with
// labels, on a free /24 of base[0].base[1].0.0/16, its gateway at .1, and
// returns the network's id and its /24. It starts at a random /24 and
// passes over those of this host's interface addresses and those the
// engine says overlap or are in use; when none is left, the error says
// so. As for containers, a cancelled create may still be carried out: it
// is waited for, so the network is known and removed.
func (e *Engine) CreateNetwork(ctx context.Context, name string, base [2]byte, labels map[string]string) (string, netip.Prefix, error) {
	used := hostSubnets()
	start, _ := rand.Int(rand.Reader, big.NewInt(256))
	var lastErr error
	for i := range 256 {
		third := byte((int(start.Int64()) + i) % 256)
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{base[0], base[1], third, 0}), 24)
		if used[p] {
			continue
		}
		if err := ctx.Err(); err != nil {
			return "", netip.Prefix{}, err
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		res, err := e.cli.NetworkCreate(cctx, name, client.NetworkCreateOptions{
			Driver: "bridge",
			IPAM:   &network.IPAM{Config: []network.IPAMConfig{{Subnet: p, Gateway: p.Addr().Next()}}},
			Labels: labels,
		})
		cancel()
		if err != nil {
			lastErr = err
			if strings.Contains(err.Error(), "overlaps") || strings.Contains(err.Error(), "in use") {
				continue
			}
			return "", netip.Prefix{}, fmt.Errorf("docker: create network %s: %s", name, FirstLine(err))
		}
		return res.ID, p, nil
	}
	return "", netip.Prefix{}, fmt.Errorf("docker: no free /24 in %d.%d.0.0/16 for network %s (last: %v)", base[0], base[1], name, lastErr)
}

// hostSubnets returns the /24s of this host's interface addresses.
func hostSubnets() map[netip.Prefix]bool {
	used := map[netip.Prefix]bool{}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return used
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() {
			used[netip.PrefixFrom(p.Addr(), 24).Masked()] = true
		}
	}
	return used
}
