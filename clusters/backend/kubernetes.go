package backend

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/locktest/locktest/clusters"
)

// Kubernetes is the backend of a Kubernetes control plane as far as a lock
// needs one: real kube-apiservers (KindKubeAPIServer, its data nodes
// n1..nN, the servers the clients talk to) over an etcd cluster of
// locktest's own (etcd members e1..eK, KindEtcd, the Extra nodes), where
// the apiservers keep the Lease objects the locks are. The apiserver is
// built from the Go module proxy, k8s.io/kubernetes at KubeVersion, by
// `make kube-apiserver` (scripts/build-kube-apiserver), into
// KubeAPIServerPath; no Debian package ships it.
const (
	Kubernetes        = "kubernetes"
	KindKubeAPIServer = "kube-apiserver"
	KubeAPIServerPort = 6443
	// KubeVersion is the version of k8s.io/kubernetes the apiserver is
	// built from.
	KubeVersion = "v1.37.2"
	// KubeMake is the make target that builds the apiserver.
	KubeMake = "kube-apiserver"
	// KubeParamEtcdMembers is the param that sizes the etcd cluster under
	// the apiservers (1, 3 or 5; 1 when unset), and KubeParamAPIServers
	// the one that says how many apiservers share it (1 to
	// KubeMaxAPIServers; 1 when unset). Each client talks to one
	// apiserver: its process number modulo the apiservers.
	KubeParamEtcdMembers = "etcd-members"
	KubeParamAPIServers  = "apiservers"
	KubeMaxAPIServers    = 3
	// ProductKubeAPIServer is the product an apiserver is (Versions).
	ProductKubeAPIServer = "kube-apiserver"
	// RoleAPIServer is the role of an apiserver; the etcd members are
	// leaders and followers (EtcdRoles).
	RoleAPIServer = "apiserver"
	// KubeUser and KubeGroup are who the token authenticates: the group
	// system:masters, which the apiserver's RBAC allows everything, as a
	// cluster admin is.
	KubeUser  = "locktest"
	KubeGroup = "system:masters"
	// kubeServiceCIDR is the apiserver's service address range; nothing
	// is served from it.
	kubeServiceCIDR = "10.96.0.0/16"
	kubeLogName     = "kube-apiserver.log"
	kubeNoClockShim = "kube-apiserver and etcd are Go programs, which read the wall clock without libc: the LD_PRELOAD clock shim cannot move them (not applicable)"
)

// KubeAPIServerPath is where `make kube-apiserver` puts the apiserver:
// $LOCKTEST_CACHE/kube-apiserver/<KubeVersion>/kube-apiserver, else the same
// under $XDG_CACHE_HOME/locktest or ~/.cache/locktest; "" when this host
// has no cache folder.
func KubeAPIServerPath() string {
	d := os.Getenv("LOCKTEST_CACHE")
	if d == "" {
		c, err := os.UserCacheDir()
		if err != nil {
			return ""
		}
		d = filepath.Join(c, "locktest")
	}
	return filepath.Join(d, "kube-apiserver", KubeVersion, "kube-apiserver")
}

// KubeToken is the bearer token of the apiserver reached at addr
// (host:port): made from the address when the apiserver starts, so that
// the clients, which are given the address, present it. It authenticates
// them as KubeUser in KubeGroup; it keeps out nothing that can reach the
// run's own addresses, which only this host and the run's own namespaces
// and containers can.
func KubeToken(addr string) string {
	sum := sha256.Sum256([]byte("locktest kube-apiserver " + addr))
	return hex.EncodeToString(sum[:16])
}

// KubeEtcdMembers reads the etcd-members param: 1 when unset, else 1, 3
// or 5.
func KubeEtcdMembers(params map[string]string) (int, error) {
	v, ok := params[KubeParamEtcdMembers]
	if !ok || v == "" {
		return 1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n != 1 && n != 3 && n != 5 {
		return 0, fmt.Errorf("kubernetes: cluster param %s=%q must be 1, 3 or 5", KubeParamEtcdMembers, v)
	}
	return n, nil
}

func init() {
	Register(Service{
		Name: Kubernetes, Rank: 9, Kind: KindKubeAPIServer, DefaultNodes: 1,
		Params: []string{KubeParamAPIServers, KubeParamEtcdMembers},
		Configure: func(l *Layout, nodes int, params map[string]string) (int, error) {
			if v, ok := params[KubeParamAPIServers]; ok {
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 || n > KubeMaxAPIServers {
					return 0, fmt.Errorf("kubernetes: cluster param %s=%q must be 1 to %d", KubeParamAPIServers, v, KubeMaxAPIServers)
				}
				nodes = n
			}
			if nodes > KubeMaxAPIServers {
				return 0, fmt.Errorf("kubernetes: %d apiservers: at most %d", nodes, KubeMaxAPIServers)
			}
			if _, err := KubeEtcdMembers(params); err != nil {
				return 0, err
			}
			l.Etcd = DefaultEtcdTiming
			return nodes, nil
		},
		Extra: func(l Layout) []NodeSpec {
			n, _ := KubeEtcdMembers(l.Params)
			out := make([]NodeSpec, n)
			for i := range out {
				out[i] = NodeSpec{Name: fmt.Sprintf("e%d", i+1), Kind: KindEtcd}
			}
			return out
		},
		Roles: func(l Layout, name string) []string {
			if l.Kind(name) == KindEtcd {
				return EtcdRoles()
			}
			return []string{RoleAPIServer}
		},
		Role: func(ctx context.Context, l Layout, _ []clusters.Node, name, addr string) (string, error) {
			if l.Kind(name) == KindEtcd {
				return EtcdRole(ctx, addr)
			}
			return RoleAPIServer, nil
		},
		StartRole: func(l Layout, name string) string {
			if l.Kind(name) == KindKubeAPIServer {
				return RoleAPIServer
			}
			return ""
		},
		Form:            formKubernetes,
		Locks:           ContenderLeases,
		Version:         askKube,
		Product:         kubeProduct,
		ClockShimReason: kubeNoClockShim,
		Reset:           resetKube,
		Residue:         kubeResidue,
	}, kubeAPIServerKind)
}

// formKubernetes starts the etcd members first, and the apiservers once
// etcd serves: an apiserver that finds no etcd at its start exits.
func formKubernetes(ctx context.Context, _ *Roster, l Layout, f Formation) error {
	if err := f.Start(ctx, l.names(KindEtcd)); err != nil {
		return err
	}
	return f.Start(ctx, l.names(KindKubeAPIServer))
}

// kubeProduct is what a node of the kubernetes backend is: an etcd member
// or an apiserver.
func kubeProduct(n clusters.Node) string {
	if strings.HasPrefix(n.Name, "e") {
		return ProductEtcd
	}
	return ProductKubeAPIServer
}

// kubeAPIServerKind is a kube-apiserver built from k8s.io/kubernetes at
// KubeVersion. It serves HTTPS on its one port with a certificate it makes
// itself at its first start (--cert-dir), authenticates the token
// KubeToken makes from its address, authorizes by RBAC, and keeps its
// objects in the cluster's etcd members.
var kubeAPIServerKind = &Kind{
	Name:         KindKubeAPIServer,
	Ports:        []Port{{Name: "https", Base: KubeAPIServerPort, Step: 1}},
	Ready:        kubeReady,
	Program:      "kube-apiserver",
	ReadyTimeout: 120 * time.Second,
	Log:          kubeLogName,
	Stdout:       true,
	Install:      "`make " + KubeMake + "` builds kube-apiserver " + KubeVersion + " from the Go module proxy into locktest's cache",
	Programs:     []HostProgram{{Name: "kube-apiserver", Param: true, Built: KubeAPIServerPath, Make: KubeMake}},
	Image:        Image{Rootfs: RootfsNodePrograms},
	Launch: func(p Placement) (Launch, error) {
		var etcd []string
		for _, m := range p.Peers {
			if p.Layout.Kind(m.Name) == KindEtcd {
				etcd = append(etcd, "http://"+m.Addr(0))
			}
		}
		if len(etcd) == 0 {
			return Launch{}, errors.New("kubernetes: the cluster has no etcd member")
		}
		key, err := serviceAccountKey()
		if err != nil {
			return Launch{}, err
		}
		tokens := path.Join(p.Dir, "tokens.csv")
		saKey := path.Join(p.Dir, "service-account.key")
		argv := []string{p.Bin("kube-apiserver"),
			"--etcd-servers=" + strings.Join(etcd, ","),
			"--bind-address=" + p.Bind, "--advertise-address=" + p.Node.IP,
			"--secure-port=" + strconv.Itoa(p.Node.Ports[0]),
			"--cert-dir=" + path.Join(p.DataDir, "certs"),
			"--token-auth-file=" + tokens,
			"--authorization-mode=RBAC",
			"--service-account-issuer=https://kubernetes.default.svc",
			"--service-account-key-file=" + saKey, "--service-account-signing-key-file=" + saKey,
			"--service-cluster-ip-range=" + kubeServiceCIDR,
			"--endpoint-reconciler-type=none",
			"--enable-priority-and-fairness=false",
			"--profiling=false",
		}
		return Launch{
			Files: []File{
				{Path: tokens, Data: fmt.Sprintf("%s,%s,%s,%q\n", KubeToken(p.Node.Addr(0)), KubeUser, KubeUser, KubeGroup)},
				{Path: saKey, Data: key, Once: true},
			},
			Dirs: []string{path.Join(p.DataDir, "certs")},
			Argv: argv,
		}, nil
	},
}

// serviceAccountKey makes the key the apiserver signs service account
// tokens with, which it must have though no client here uses one.
func serviceAccountKey() (string, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", fmt.Errorf("kubernetes: service account key: %w", err)
	}
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return "", fmt.Errorf("kubernetes: service account key: %w", err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})), nil
}

// kubeGet asks the apiserver at addr for path over HTTPS with its token,
// not checking its certificate, which it made itself; a status other than
// 200 is an error with the body's first line.
func kubeGet(ctx context.Context, addr, p string) ([]byte, error) {
	return kubeDo(ctx, http.MethodGet, addr, p)
}

// kubeDo is kubeGet with another method.
func kubeDo(ctx context.Context, method, addr, p string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, "https://"+addr+p, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+KubeToken(addr))
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true,
	}}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		first, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
		return nil, fmt.Errorf("%s %s: %s: %s", method, p, resp.Status, first)
	}
	return body, nil
}

// kubeReady asks the apiserver at addr for /readyz: it is ready once its
// storage, its informers and its post-start hooks (the bootstrap RBAC
// roles among them) are.
func kubeReady(ctx context.Context, addr string) error {
	_, err := kubeGet(ctx, addr, "/readyz")
	return err
}

// askKube asks an apiserver for its /version, and a node that does not
// speak HTTPS (an etcd member) for its status, as the etcd backend does.
func askKube(ctx context.Context, addr string, params map[string]string) (string, string, error) {
	body, err := kubeGet(ctx, addr, "/version")
	if err != nil {
		if p, v, eerr := askEtcd(ctx, addr, params); eerr == nil {
			return p, v, nil
		}
		return "", "", err
	}
	var v struct {
		GitVersion string `json:"gitVersion"`
	}
	if err := json.Unmarshal(body, &v); err != nil || v.GitVersion == "" {
		return "", "", fmt.Errorf("GET /version: no gitVersion in %q", body)
	}
	return ProductKubeAPIServer, v.GitVersion, nil
}

// kubeSystemNamespaces hold the Leases the apiservers keep of themselves,
// which a fresh cluster has too.
var kubeSystemNamespaces = []string{"kube-system", "kube-node-lease"}

// kubeLeases lists the Lease objects outside kubeSystemNamespaces, as
// namespace/name, through the apiserver at addr.
func kubeLeases(ctx context.Context, addr string) ([]string, error) {
	body, err := kubeGet(ctx, addr, "/apis/coordination.k8s.io/v1/leases")
	if err != nil {
		return nil, err
	}
	var list struct {
		Items []struct {
			Meta struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("list leases: %w", err)
	}
	var out []string
	for _, it := range list.Items {
		if !slices.Contains(kubeSystemNamespaces, it.Meta.Namespace) {
			out = append(out, it.Meta.Namespace+"/"+it.Meta.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// resetKube is the kubernetes backend's Reset: it deletes every Lease
// object outside kubeSystemNamespaces (the impls' locks) through the
// first apiserver, and returns once every apiserver lists none. The
// impls' namespace stays: deleting it takes the apiserver a while
// (Terminating), during which the next run could make no Lease in it.
func resetKube(ctx context.Context, l Layout, nodes []clusters.Node) error {
	apis := l.OfKind(nodes, KindKubeAPIServer)
	if len(apis) == 0 {
		return fmt.Errorf("%s: reset: no apiserver", l.Backend)
	}
	leases, err := kubeLeases(ctx, apis[0].Addr)
	if err != nil {
		return fmt.Errorf("%s: reset %s: %w", l.Backend, apis[0].Name, err)
	}
	for _, lease := range leases {
		ns, name, _ := strings.Cut(lease, "/")
		if _, err := kubeDo(ctx, http.MethodDelete, apis[0].Addr, "/apis/coordination.k8s.io/v1/namespaces/"+ns+"/leases/"+name); err != nil && !strings.Contains(err.Error(), "404") {
			return fmt.Errorf("%s: reset %s: delete lease %s: %w", l.Backend, apis[0].Name, lease, err)
		}
	}
	return Poll(ctx, func() error {
		res, err := kubeResidue(ctx, l, nodes)
		if err == nil && len(res) > 0 {
			err = fmt.Errorf("%s: reset: left %s", l.Backend, strings.Join(res, "; "))
		}
		return err
	})
}

// kubeResidue is the kubernetes backend's Residue: the Lease objects
// outside kubeSystemNamespaces that each apiserver lists.
func kubeResidue(ctx context.Context, l Layout, nodes []clusters.Node) ([]string, error) {
	var out []string
	for _, n := range l.OfKind(nodes, KindKubeAPIServer) {
		leases, err := kubeLeases(ctx, n.Addr)
		if err != nil {
			return out, fmt.Errorf("%s: residue of %s: %w", l.Backend, n.Name, err)
		}
		out = append(out, listed(fmt.Sprintf("%s %s: lease ", l.Backend, n.Name), leases)...)
	}
	return out, nil
}
