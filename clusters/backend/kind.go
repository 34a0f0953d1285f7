package backend

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/locktest/locktest/internal/shellquote"
)

// Kind is one kind of node, what server a node runs, as every provider
// runs it: its ports, the program its pid is checked against, how long its
// start may take, and its launch, the files and the command line of one
// node wherever a provider placed it. A provider keeps only how it runs a
// launch on its hosts (a process, a container, a command over SSH); it
// writes none of these facts again.
type Kind struct {
	// Name is the kind's name (KindRedis, ...).
	Name string
	// Ports are the node's ports, the one clients dial first.
	Ports []Port
	// Ready asks the node at addr, its first port, once, over the network
	// as a client would, whether it serves (see the package function
	// Ready, which every provider waits with).
	Ready func(ctx context.Context, addr string) error
	// Program is what the command line of a node's server holds, which a
	// provider checks a pid against before it signals it; NodeProgram
	// for a kind that runs in locktest's own node program.
	Program string
	// ReadyTimeout bounds the wait for one node to serve after its start
	// (in a container, or over SSH, where starts are slowest).
	ReadyTimeout time.Duration
	// Log is the name of the node's log in its directory. When Stdout is
	// set the server writes its log on its standard output, which the
	// provider sends there; otherwise the server writes it itself, to
	// Placement.LogFile.
	Log    string
	Stdout bool
	// Install says how a host gets the kind's programs (the Debian
	// packages that bring them), for the error of a host that lacks one.
	Install string
	// Programs are the host programs a node's launch runs (Placement.Bin),
	// by their usual names; none but the upstream server of an image
	// without locktest's for a kind that runs in locktest's node program.
	Programs []HostProgram
	// Image says how the docker provider gets the image that the nodes of
	// a backend whose data nodes are of this kind run (ImageOf).
	Image Image
	// Launch returns what runs the node placed at p. It is the same on
	// every provider, but for what p says of the host.
	Launch func(p Placement) (Launch, error)
	// RunAs names the user a node's server and its Init run as when the
	// provider would run them as root, for a server that refuses root
	// (PostgreSQL); "" runs them as the provider's user.
	RunAs string
	// Several says the server is a tree of processes (PostgreSQL's
	// postmaster and a backend per connection, MariaDB's helpers): a
	// pause, a kill and a stop take every process below the server too,
	// and the server's group.
	Several bool
	// StopSignal asks the server to stop at once but cleanly; SIGTERM
	// when 0.
	StopSignal syscall.Signal
	// DataDirQuery, when set, asks the server at addr for its data
	// directory, a real query: a provider checks that the server that
	// answers on a node's port is the node's, not another on that port.
	DataDirQuery func(ctx context.Context, addr string) (string, error)
	// PeerServing, when set, asks a node at addr, its second port (Ports[1]),
	// whether it serves its peers yet. A provider that starts the nodes of
	// a new cluster starts each once the one before serves its peers:
	// those of such a kind lose time when a peer's port is open and not
	// yet served.
	PeerServing func(ctx context.Context, addr string) error
}

// HostProgram is a program of a host that a kind's nodes run.
type HostProgram struct {
	// Name is the program's usual name, which Placement.Bin resolves.
	Name string
	// Debian is where Debian's package puts the program when that is
	// outside a user's PATH, a glob whose * is a version (the highest
	// first): a provider looks there before the PATH. "" when the PATH
	// has it.
	Debian string
	// Param says that the local provider takes the program's path as a
	// cluster param named after it (--cluster-opt mariadbd=PATH). For a
	// kind of locktest's node program, the param makes the local provider
	// run that program in its place (--cluster-opt etcd=/usr/bin/etcd):
	// its launch then sees no NodeProgram.
	Param bool
	// Built, when set, returns where locktest builds the program itself
	// when no package ships it, and Make names the make target that builds
	// it there (kube-apiserver: `make kube-apiserver`): a provider looks
	// there before the PATH, and a host without it is told to run Make.
	Built func() string
	Make  string
}

// BuiltReason says why this host lacks a program that locktest builds
// itself for the nodes of backend b (Kind.NotBuilt of one of its kinds),
// naming the make target that builds it; "" when it has every one, or b
// needs none.
func BuiltReason(b string) string {
	l, err := NewLayout(b, 0, nil)
	if err != nil {
		return ""
	}
	for _, n := range l.Nodes {
		if k, err := KindOf(n.Kind); err == nil {
			if why := k.NotBuilt(); why != "" {
				return b + ": " + why
			}
		}
	}
	return ""
}

// NotBuilt says why this host cannot run the nodes of kind k although
// nothing is wrong: one of its programs is one that locktest builds itself
// (HostProgram.Built), and this host has it neither there nor on the
// PATH; the reason names the make target. "" otherwise.
func (k *Kind) NotBuilt() string {
	for _, p := range k.Programs {
		if p.Built == nil {
			continue
		}
		if fi, err := os.Stat(p.Built()); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			continue
		}
		if _, err := exec.LookPath(p.Name); err == nil {
			continue
		}
		return fmt.Sprintf("no %s at %s nor on the PATH: `make %s` builds it", p.Name, p.Built(), p.Make)
	}
	return ""
}

// Image is how the docker provider gets the image of a kind's nodes: the
// official image, or the one locktest builds from this host
// (clusters/images, `locktest images build`).
type Image struct {
	// Official is the official image, name:tag, that the nodes run when
	// the run names no other and locktest built none; "" for a kind that
	// runs in locktest's node program, whose image locktest builds.
	Official string
	// Rootfs says what locktest's own image is assembled from; a kind that
	// runs in locktest's node program needs none (its image holds
	// locktest's executable alone).
	Rootfs Rootfs
	// Cmd is the image's default command, if any (the provider gives each
	// container its own).
	Cmd []string
}

// Rootfs names how clusters/images assembles an image's root file system
// from this host's installed packages: the mechanism is the image
// builder's, the choice the kind's.
type Rootfs int

// The root file systems the image builder assembles.
const (
	// RootfsPrograms holds the kind's Programs with their libraries.
	RootfsPrograms Rootfs = iota + 1
	// RootfsJava holds the host's Java runtime with its libraries and
	// ZooKeeper's jars (ZooKeeperClassPath).
	RootfsJava
	// RootfsMariaDB holds the host's MariaDB server, its install script
	// and what it reads, with the shell tools of a SQL server's start.
	RootfsMariaDB
	// RootfsPostgres holds the host's highest PostgreSQL, its modules,
	// share directory and time zones, and its user, with the shell tools
	// of a SQL server's start.
	RootfsPostgres
	// RootfsNodePrograms holds locktest's node program, as the image of a
	// kind that runs in it, and the kind's Programs beside it in
	// /usr/local/bin: the image of a backend whose nodes are of both
	// sorts (a kubernetes cluster's etcd members and apiservers).
	RootfsNodePrograms
)

// NodeProgram stands in Kind.Program for locktest's own node program,
// which each provider names its own way (the binary it runs, the name it
// uploads it under).
const NodeProgram = "<locktest node>"

// Port is one port of a kind of node. A node with an address of its own
// listens on Base; the k-th node of the kind (from 0) that shares an
// address with others of its kind listens on Base + k*Step.
type Port struct {
	// Name says what the port is for ("client", "peer").
	Name string
	Base int
	Step int
}

// At returns the port of the k-th node of the kind on a shared address.
func (p Port) At(k int) int { return p.Base + k*p.Step }

// Placed is a node as its provider placed it: its name, the address the
// other nodes and the clients reach it at, and its ports in the order of
// its kind's Ports.
type Placed struct {
	Name  string
	IP    string
	Ports []int
}

// Addr returns the node's address with its i-th port, host:port.
func (p Placed) Addr(i int) string { return net.JoinHostPort(p.IP, strconv.Itoa(p.Ports[i])) }

// Placement is where a provider put a node, and what its host offers:
// everything a Kind's Launch needs.
type Placement struct {
	// Layout is the node's cluster.
	Layout *Layout
	// Node is the node; Peers are every node of the cluster in the
	// layout's order, the node among them.
	Node  Placed
	Peers []Placed
	// Bind is the address the node listens on: its own address, or
	// 0.0.0.0 where the address it is reached at is not one of its host's
	// to bind (a container's) or it serves every address of its host.
	Bind string
	// Dir is the node's directory on its host, for its files; DataDir its
	// data directory (inside Dir, or a directory of its own).
	Dir, DataDir string
	// LogFile is the log the server writes itself, or "" when the
	// provider takes the log from its standard output.
	LogFile string
	// Bin returns the command that runs a host program by its usual name
	// ("redis-server", "java"): the name itself, or the path the
	// provider's host gives for it.
	Bin func(program string) string
	// NodeProgram is the command line that runs locktest's node program on
	// the host; nil when the host runs the upstream servers instead (an
	// image that lacks locktest's).
	NodeProgram []string
	// ClassPath is the JVM class path of a ZooKeeper peer on the host.
	ClassPath string
	// Persistence is a Redis node's persistence mode.
	Persistence string
	// Header is the first comment line of the configuration files the
	// node is given, naming the node and the run.
	Header string
	// User is the user the provider runs the node's server as (mariadbd
	// takes it as --user, which root must give).
	User string
	// Socket is the path of a server's Unix socket, for a server that
	// always makes one (mariadbd), short enough for a socket's address
	// (107 bytes); SocketDir the directory of one that puts its sockets
	// there (PostgreSQL), "" for none.
	Socket, SocketDir string
}

// Launch is what runs one node: files to write, then a command line.
type Launch struct {
	// Files are written before each start, but those marked Once, which
	// only the first start writes (the server rewrites them as it runs).
	Files []File
	// Argv is the server's command line, its program first.
	Argv []string
	// Dirs are the directories to make before the first start.
	Dirs []string
	// Needs are files the host must have for the launch to run (a JVM's
	// class path), beside its program.
	Needs []string
	// Init, when set, makes the node's data directory at its first start
	// (a SQL server's): a provider runs it, as the server's user, when the
	// data directory has no Init.Done yet.
	Init *Init
}

// Init is the command that makes a node's data directory.
type Init struct {
	// Done is the file or directory, in the data directory, that exists
	// once the data directory was made.
	Done string
	// Argv is its command line, Env the environment assignments it needs
	// beside the provider's.
	Argv, Env []string
	// Append are text to append, once it ran, to files it made (a line of
	// pg_hba.conf).
	Append []File
}

// Shell renders the init as one line of POSIX shell, for a provider that
// starts its nodes through a shell on the node's host: unless dataDir
// holds the init's done-file, it runs the init (after the argv prefix as,
// setpriv's when it runs as another user; none when nil) with no input
// and its output appended to logFile, and then appends the init's text to
// the files it made. Where that fails, the line prints "<program>
// failed: " and the log's last line to standard error, and exits 1.
func (i *Init) Shell(dataDir string, as []string, logFile string) string {
	var after strings.Builder
	for _, f := range i.Append {
		fmt.Fprintf(&after, " && printf %%s %s >> %s", shellquote.Quote(f.Data), shellquote.Quote(f.Path))
	}
	argv := append(slices.Clone(as), i.Argv...)
	if len(i.Env) > 0 {
		argv = append([]string{"env"}, append(slices.Clone(i.Env), argv...)...)
	}
	return fmt.Sprintf("[ -e %[1]s ] || { %[2]s </dev/null >>%[3]s 2>&1%[4]s; } || { echo %[5]s\"$(grep . %[3]s | tail -n 1)\" >&2; exit 1; }",
		shellquote.Quote(path.Join(dataDir, i.Done)), shellquote.Join(argv), shellquote.Quote(logFile), after.String(),
		shellquote.Quote(path.Base(i.Argv[0])+" failed: "))
}

// File is one file of a launch, at an absolute path on the node's host.
type File struct {
	Path string
	Data string
	Once bool
}
