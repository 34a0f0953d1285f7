package main

// Bad input gets one line on stderr saying what and where, exit 2, nothing
// already recorded lost and nothing left running; never a panic.

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/locktest/locktest/clusters/backend"
	"github.com/locktest/locktest/history"
	"github.com/locktest/locktest/runstore"
	"github.com/locktest/locktest/testkit/gate"
)

// badCase is a command line with one bad value and the text its error
// line must hold. The args follow the command's base arguments, so they
// may override them.
type badCase struct {
	args []string
	want string
}

func bc(want string, args ...string) badCase { return badCase{args, want} }

// withFault gives margin's cases the one fault it varies, so that they
// get as far as its first run.
func withFault(cs ...badCase) []badCase {
	for i := range cs {
		cs[i].args = append([]string{"--faults", "pause-client"}, cs[i].args...)
	}
	return cs
}

// badValues holds, for every flag of every command ("run --ttl"), command
// lines that give it a malformed or out-of-range value. A flag of a type
// that does not parse every string (int, duration, float, bool) also gets
// an automatic case with a value that does not parse. TestEveryFlagRefusesABadValue
// fails for a flag with no case here (nor in anyValue).
var badValues = map[string][]badCase{
	"run --impl": {bc(`--impl: unknown impl "nope" (known: etcd-lease-txn, etcd-mutex, `, "--impl", "nope")},
	"run --faults": {bc(`--faults: unknown fault "meteor" (known: bridge, `, "--faults", "meteor"),
		bc(`--faults: unknown fault "kill-node+"`, "--faults", "kill-node+")},
	"run --clients": {bc("--clients must be at least 1, got 0", "--clients", "0"), bc("--clients must be at least 1, got -3", "--clients", "-3")},
	"run --locks":   {bc("--locks must be at least 1, got 0", "--locks", "0")},
	"run --ttl":     {bc("--ttl must be at least 1ms, got 0s", "--ttl", "0"), bc("--ttl must be at least 1ms, got -1s", "--ttl", "-1s")},
	"run --time":    {bc("--time must be positive, got 0s", "--time", "0"), bc("--time must be positive, got -1s", "--time", "-1s")},
	"run --resource": {bc(`--resource: unknown resource mode "fencing" (want none, fenced, check-and-set, etcd-guarded)`, "--resource", "fencing"),
		bc("--resource fenced needs fencing tokens, and redis-naive-del grants none", "--impl", "redis-naive-del", "--resource", "fenced"),
		bc("--resource etcd-guarded needs an impl that guards writes", "--resource", "etcd-guarded")},
	"run --store": {bc("store: mkdir STORE/file: not a directory", "--store", "STORE/file")},
	"run --schedule": {bc("--schedule: open STORE/nodir/schedule.json: no such file or directory", "--schedule", "STORE/nodir/schedule.json"),
		bc("--schedule STORE/file: not a schedule file: invalid character 'x'", "--schedule", "STORE/file"),
		bc("--faults changes nothing with --schedule: the schedule file says which faults go in", "--schedule", "STORE/file", "--faults", "kill-node"),
		bc("--pause changes nothing with --schedule", "--schedule", "STORE/file", "--pause", "1s")},
	"run --name":          {bc(`--name "a/b" must be a plain folder name`, "--name", "a/b"), bc(`--name ".." must be a plain folder name`, "--name", "..")},
	"run --think":         {bc("--think must not be negative, got -1s", "--think", "-1s")},
	"run --retry":         {bc("--retry must not be negative, got -1s", "--retry", "-1s")},
	"run --retry-max":     {bc("--retry-max must not be negative, got -1s", "--retry-max", "-1s")},
	"run --backoff":       {bc(`--backoff must be exponential or uniform, got "linear"`, "--backoff", "linear")},
	"run --retry-release": {bc("--retry-release must not be negative, got -1s", "--retry-release", "-1s")},
	"run --retry-acquire": {bc("--retry-acquire must not be negative, got -1", "--retry-acquire", "-1")},
	"run --max-sections":  {bc("--max-sections must not be negative, got -1", "--max-sections", "-1")},
	"run --on-lost": {bc(`--on-lost must be ignore or stop-writing, got "panic"`, "--on-lost", "panic"),
		bc("--on-lost stop-writing changes nothing in this run: redis-set-nx-px sends no lost notices", "--on-lost", "stop-writing")},
	"run --profile":    {bc("--profile: mkdir STORE/file: not a directory", "--profile", "STORE/file/p")},
	"check --profile":  {bc("--profile: mkdir STORE/file: not a directory", "--profile", "STORE/file/p")},
	"run --work":       {bc("--work must not be negative, got -1s", "--work", "-1s")},
	"run --work-min":   {bc("--work-min must be between 0 and --work (0s), got 5s", "--work-min", "5s")},
	"run --op-timeout": {bc("--op-timeout must be positive, got 0s", "--op-timeout", "0")},
	"run --interval": {bc("--interval must be positive, got 0s", "--faults", "pause-client", "--interval", "0"),
		bc("--interval changes nothing in this run: it needs --faults (faults: none)", "--interval", "1s")},
	"run --pause": {bc("--pause must not be negative, got -1s", "--faults", "pause-client", "--pause", "-1s"),
		bc("--pause changes nothing in this run: it needs --faults pause-client (faults: kill-node)", "--faults", "kill-node", "--pause", "1s")},
	"run --pause-point": {bc("--pause-point must be one of after-acquire, before-write for redis-set-nx-px, got \"nowhere\"", "--faults", "pause-client", "--pause-point", "nowhere"),
		bc("--pause-point changes nothing in this run: it needs --faults pause-client, or kill-client with --kill-holder", "--faults", "kill-client", "--pause-point", "before-write")},
	"run --down": {bc("--down must not be negative, got -1s", "--faults", "kill-node", "--down", "-1s"),
		bc("--down changes nothing in this run: it needs --faults kill-all, kill-node", "--down", "2s")},
	"run --window": {bc("--window must be positive, got 0s", "--faults", "pause-node", "--window", "0"),
		bc("--window changes nothing in this run: it needs a fault that reads --window (any but clock-reset, kill-all, kill-node, pause-client, power-loss-all)", "--faults", "pause-client", "--window", "3s")},
	"run --quiet-time": {bc("--quiet-time must be at least 0 and shorter than --time (2s), got -1s", "--faults", "pause-client", "--quiet-time", "-1s"),
		bc("--quiet-time must be at least 0 and shorter than --time (2s), got 2s", "--faults", "pause-client", "--quiet-time", "2s")},
	"run --net": {bc(`--net must be auto, netns, loopback, got "wifi"`, "--net", "wifi")},
	"run --subnet": {bc(`--subnet "300.1.1.0/24": want an IPv4 /24 such as 10.77.0.0/24`, "--subnet", "300.1.1.0/24"),
		bc(`--subnet "10.77.3.0/16": want an IPv4 /24`, "--subnet", "10.77.3.0/16"),
		bc("--subnet is the subnet of the run's network namespaces, and this run has none", "--subnet", "10.77.3.0/24")},
	"run --partition": {bc(`--partition: "n1" has one group; a partition needs two or more, separated by /`, "--faults", "partition", "--partition", "n1"),
		bc(`--partition: empty group in ",,/"`, "--faults", "partition", "--partition", ",,/"),
		bc(`--partition: host "x9": want a node (n1, n2, ...) or a client host (c0, c1, ...)`, "--faults", "partition", "--partition", "n1,x9/n2"),
		bc("--partition: host c7: the run has client hosts c0 to c4 (--clients 5)", "--faults", "partition", "--partition", "n1,c7/n2"),
		bc("--partition changes nothing in this run: it needs --faults partition", "--partition", "n1/n2")},
	"run --target": {bc(`--target: target "x": want fault=target[,target...], e.g. clock-bump=n3`, "--target", "x"),
		bc(`--target: target "kill-node=": want fault=target`, "--target", "kill-node="),
		bc(`--target: target "meteor=n1": unknown fault "meteor"`, "--target", "meteor=n1"),
		bc(`--target names fault "kill-node", which the run does not have (faults: pause-client)`, "--faults", "pause-client", "--target", "kill-node=n1")},
	"run --clock-direction": {bc(`--clock-direction must be forward or backward, got "up"`, "--faults", "clock-bump", "--clock-direction", "up")},
	"run --stagger": {bc("--stagger must not be negative, got -1s", "--faults", "pause-client+kill-node", "--stagger", "-1s"),
		bc("--stagger changes nothing in this run: it needs a combined fault (--faults a+b)", "--faults", "pause-client", "--stagger", "1s")},
	"run --loss": {bc("--loss must be in (0, 1], got 1.5", "--faults", "loss", "--loss", "1.5"), bc("--loss must be in (0, 1], got 0", "--faults", "loss", "--loss", "0"),
		bc("--loss changes nothing in this run: it needs --faults loss", "--loss", "0.5")},
	"run --sync-delay": {bc("--sync-delay must be positive and at most 10m0s, got 11m0s", "--faults", "slow-disk", "--sync-delay", "11m"),
		bc("--sync-delay changes nothing in this run: it needs --faults slow-disk", "--sync-delay", "2s")},
	"run --delay":      {bc("--delay must be positive, got 0s", "--faults", "delay", "--delay", "0")},
	"run --clock-bump": {bc("--clock-bump must not be negative", "--faults", "clock-bump", "--clock-bump", "-1s")},
	"run --strobe":     {bc("--strobe must be positive, got 0s", "--faults", "clock-strobe", "--strobe", "0")},
	"run --clock-rate": {bc("--clock-rate must be positive and not 1, got 1", "--faults", "clock-rate-client", "--clock-rate", "1"),
		bc("--clock-rate must be positive and not 1, got -2", "--faults", "clock-rate-client", "--clock-rate", "-2"),
		bc("--clock-rate changes nothing in this run: it needs --faults clock-rate-client", "--clock-rate", "0.5")},
	"run --kill-holder": {bc("--kill-holder changes nothing in this run: it needs --faults kill-client (faults: pause-client)", "--faults", "pause-client", "--kill-holder")},
	"run --persistence": {bc(`--persistence must be off, everysec, always, got "sometimes"`, "--persistence", "sometimes"),
		bc("--persistence is a setting of redis, redis-sentinel, redis-cluster only, and etcd-mutex runs etcd, which has none", "--impl", "etcd-mutex", "--persistence", "always")},
	"run --impl-opt": {bc(`invalid argument "x" for "--impl-opt" flag: x must be formatted as key=value`, "--impl-opt", "x")},
	"run --client": {bc("--client nope: open clients/nope.yaml: no such file or directory", "--client", "nope"),
		bc("--client STORE/none.py: no program STORE/none.py", "--client", "STORE/none.py")},
	"run --backend": {bc(`--backend must be one of `+strings.Join(slices.Sorted(slices.Values(backend.All())), ", ")+` for an external client, got "mongo"`, "--client", "/bin/sh", "--backend", "mongo"),
		bc("--backend changes nothing in this run: it needs --client", "--backend", "redis")},
	"run --lib": {bc(`--lib "github.com/go-redsync/redsync/v4": want module@version`, "--impl", "redlock", "--lib", "github.com/go-redsync/redsync/v4"),
		bc(`--lib "github.com/go-redsync/redsync/v4@latest": version "latest" is not a canonical semantic version`, "--impl", "redlock", "--lib", "github.com/go-redsync/redsync/v4@latest"),
		bc("--lib github.com/go-zookeeper/zk@v1.0.3: redlock is written with github.com/go-redsync/redsync/v4, github.com/redis/go-redis/v9, and github.com/go-zookeeper/zk is none of them", "--impl", "redlock", "--lib", "github.com/go-zookeeper/zk@v1.0.3"),
		bc("--lib pins the libraries of a Go impl (--impl), and --client runs an external client: give one of them", "--client", "kazoo", "--lib", "github.com/go-zookeeper/zk@v1.0.3")},
	"run --client-opt": {bc(`invalid argument "x" for "--client-opt" flag: x must be formatted as key=value`, "--client-opt", "x"),
		bc("--client-opt changes nothing in this run: it needs --client", "--client-opt", "a=b")},
	"run --cluster-opt": {bc(`invalid argument "x" for "--cluster-opt" flag: x must be formatted as key=value`, "--cluster-opt", "x")},
	"run --provider":    {bc(`--provider must be local, docker or ssh, got "podman"`, "--provider", "podman")},
	"run --inventory": {bc("--client-addresses and --insecure-ignore-host-key need --provider ssh", "--inventory", "STORE/lab.yaml"),
		bc("inventory STORE/none.yaml: no such file or directory", "--provider", "ssh", "--inventory", "STORE/none.yaml"),
		bc("inventory STORE/bad.yaml:1: field scenarios not found", "--provider", "ssh", "--inventory", "STORE/bad.yaml")},
	"run --hosts": {bc("--hosts: entry 2: no address", "--provider", "ssh", "--hosts", "a,,b"),
		bc("--inventory and --hosts both name the hosts: give one", "--provider", "ssh", "--hosts", "a", "--inventory", "STORE/lab.yaml")},
	"run --ssh-user": {bc("--ssh-user, --ssh-key, --known-hosts and --client-addresses go with --hosts", "--provider", "ssh", "--inventory", "STORE/lab.yaml", "--ssh-user", "admin")},
	"run --ssh-key": {bc("ssh a: key: open STORE/nokey: no such file or directory", "--provider", "ssh", "--hosts", "a", "--insecure-ignore-host-key", "--ssh-key", "STORE/nokey"),
		bc("ssh a: key STORE/file: ssh: no key found", "--provider", "ssh", "--hosts", "a", "--insecure-ignore-host-key", "--ssh-key", "STORE/file")},
	"run --client-addresses": {bc(`--client-addresses: entry 1 "x": want an IPv4 address or a CIDR block`, "--provider", "ssh", "--hosts", "a", "--client-addresses", "x"),
		bc("--ssh-user, --ssh-key, --known-hosts and --client-addresses go with --hosts", "--provider", "ssh", "--inventory", "STORE/lab.yaml", "--client-addresses", "10.0.0.9"),
		bc("--client-addresses and --insecure-ignore-host-key need --provider ssh", "--client-addresses", "10.0.0.9")},
	"run --known-hosts": {bc("ssh: known_hosts STORE/none: no such file or directory", "--provider", "ssh", "--hosts", "a", "--known-hosts", "STORE/none")},
	"run --image": {bc(`invalid argument "x" for "--image" flag`, "--image", "x"), bc("--image needs --provider docker", "--image", "redis=redis:7.2"),
		bc(`--image mongo=mongo:7: the docker provider has no backend "mongo"`, "--provider", "docker", "--image", "mongo=mongo:7")},
	"run --expect":    {bc(`--expect must be valid or invalid, got "maybe"`, "--expect", "maybe")},
	"run --log-level": {bc(`--log-level must be debug, info, warn, error, got "loud"`, "--log-level", "loud")},

	"debate --scenarios": {bc("--scenarios: open STORE/none.yaml: no such file or directory", "--scenarios", "STORE/none.yaml"),
		bc(`--scenarios: STORE/bad.yaml: line 3: field colour not found (in scenario "a")`, "--scenarios", "STORE/bad.yaml")},
	"debate --only":  {bc(`--only: no scenario "nope" (see locktest debate --list)`, "--only", "nope")},
	"debate --seeds": {bc("--seeds must be at least 1, got 0", "--seeds", "0"), bc("--seeds must be at least 1, got -1", "--seeds", "-1")},
	"debate --store": {bc("--store: mkdir STORE/file: not a directory", "--store", "STORE/file")},
	"debate --out":   {bc("--out: mkdir STORE/file: not a directory", "--out", "STORE/file/out")},
	"debate --junit": {bc("--junit: stat STORE/nodir: no such file or directory", "--junit", "STORE/nodir/j.xml"), bc("--junit: STORE is a folder", "--junit", "STORE")},
	"debate --provider": {bc(`--provider must be local or docker or ssh, got "podman"`, "--provider", "podman"),
		bc("--provider ssh needs --inventory FILE", "--provider", "ssh")},
	"debate --impl": {bc(`--impl: no scenario runs "nope" (see locktest debate --list)`, "--only", "1", "--impl", "nope")},
	"debate --inventory": {bc("--inventory needs --provider ssh", "--inventory", "STORE/lab.yaml"),
		bc("--inventory: inventory STORE/none.yaml: no such file or directory", "--provider", "ssh", "--inventory", "STORE/none.yaml")},
	"debate --findings":     {bc("--findings: stat STORE/nodir: no such file or directory", "--findings", "STORE/nodir/f.md")},
	"debate --track-record": {bc("--track-record: stat STORE/nodir: no such file or directory", "--track-record", "STORE/nodir/t.md")},
	"debate --over": {bc("--over goes with --track-record: it names the board the new rows of the track record go over", "--over", "STORE/nodir/b.json"),
		bc("--over: open STORE/nodir/b.json: no such file or directory", "--scenarios", "testdata/one-bug.yaml", "--track-record", "STORE/t.md", "--over", "STORE/nodir/b.json"),
		bc("--over: STORE/bad.yaml: invalid character", "--scenarios", "testdata/one-bug.yaml", "--track-record", "STORE/t.md", "--over", "STORE/bad.yaml"),
		bc(`--over: testdata/stale-board.json: scenario x-1-fixed seed 1 ran "locktest run --impl etcd-mutex --seed 1", which is not the scenario as the bugs file has it`,
			"--scenarios", "testdata/one-bug.yaml", "--track-record", "STORE/t.md", "--over", "testdata/stale-board.json")},
	"debate --json": {bc("--json: stat STORE/nodir: no such file or directory", "--json", "STORE/nodir/b.json"), bc("--json: STORE is a folder", "--json", "STORE")},
	"debate --parallel": {bc("--parallel must be at least 1, got 0", "--parallel", "0"),
		bc("--parallel 2: the ssh provider's hosts take one run at a time", "--provider", "ssh", "--inventory", "STORE/lab.yaml", "--parallel", "2")},
	"debate --max-rate": {bc(`--max-rate must be a rate between 0 and 100%, such as 15% or 0.15, got "150%"`, "--max-rate", "150%"),
		bc(`--max-rate must be a rate between 0 and 100%, such as 15% or 0.15, got "often"`, "--max-rate", "often")},
	"debate --shard": {bc(`--shard: want I/N with 1 ≤ I ≤ N, such as 2/4, got "3/2"`, "--shard", "3/2"), bc(`--shard: want I/N with 1 ≤ I ≤ N, such as 2/4, got "1"`, "--shard", "1"),
		bc("--shard needs a fixed set of runs: leave out --until-reproduced and --until-ci-width", "--shard", "1/2", "--until-reproduced")},
	"debate --until-ci-width": {bc(`--until-ci-width must be a width between 0 and 100%, such as 20% or 0.2, got "0"`, "--until-ci-width", "0"),
		bc("--until-ci-width takes its seeds up to --max-seeds; leave out --seeds", "--until-ci-width", "20%")},
	"debate --max-seeds": {bc("--max-seeds caps --until-ci-width; without it, give --seeds", "--max-seeds", "5")},

	"matrix --impl":   {bc(`--impl: unknown impl "nope" (known: etcd-lease-txn, `, "--impl", "nope")},
	"matrix --faults": {bc(`--faults: unknown fault class "meteor" (known: none, client-pause, node-pause, kill-restart, partition, clock, client-clock, or a fault: bridge, `, "--faults", "meteor")},
	"matrix --client": {bc("--client nope: open clients/nope.yaml: no such file or directory", "--client", "nope"),
		bc("--client STORE/none.py: no program STORE/none.py", "--client", "STORE/none.py")},
	"matrix --seeds": {bc("--seeds must be at least 1, got 0", "--seeds", "0")},
	// The flags a matrix shares with run, as a deployment's settings.
	"matrix --resource": {bc(`--resource must be fenced, none in a matrix, got "check-and-set"`, "--resource", "check-and-set"),
		bc("--resource fenced changes nothing in this matrix: its saved-by-fencing column reruns the client-pause class, and --faults leaves it out", "--resource", "fenced")},
	"matrix --cluster-opt": {bc("--cluster-opt sync changes nothing in this matrix: no backend of its impls (redis) reads it", "--cluster-opt", "sync=always"),
		bc("--cluster-opt: nats: ", "--impl", "nats-kv", "--cluster-opt", "sync=sometimes")},
	"matrix --impl-opt": {bc("--impl-opt needs a matrix of one impl or client (--impl NAME)", "--impl", "redlock", "--impl-opt", "unlock=library")},
	"matrix --image":    {bc("--image ", "--image", "redis=redis:7.2")},
	"matrix --provider": {bc(`--provider must be local or docker or ssh, got "podman"`, "--provider", "podman"),
		bc("--provider ssh needs --inventory FILE", "--provider", "ssh")},
	"matrix --persistence": {bc(`--persistence must be off, everysec, always, got "sometimes"`, "--persistence", "sometimes")},
	"matrix --junit":       {bc("--junit: ", "--junit", "STORE/nodir/m.xml")},
	"matrix --inventory": {bc("--inventory needs --provider ssh", "--inventory", "STORE/lab.yaml"),
		bc("--inventory: inventory STORE/none.yaml: no such file or directory", "--provider", "ssh", "--inventory", "STORE/none.yaml")},
	"matrix --time":    {bc("--time must be at least 2s (a run needs time for a fault and its recovery), got 1s", "--time", "1s")},
	"matrix --ttl":     {bc("--ttl must be at least 1ms, got 0s", "--ttl", "0")},
	"matrix --clients": {bc("--clients must be at least 2 (mutual exclusion needs contenders), got 1", "--clients", "1")},
	"matrix --store":   {bc("--store: mkdir STORE/file: not a directory", "--store", "STORE/file")},
	"matrix --out":     {bc("--out: mkdir STORE/file: not a directory", "--out", "STORE/file/out")},
	"matrix --md":      {bc("--md: stat STORE/nodir: no such file or directory", "--md", "STORE/nodir/m.md")},
	"matrix --from":    {bc("--from: open STORE/nodir: no such file or directory", "--from", "STORE/nodir")},
	"matrix --parallel": {bc("--parallel must be at least 1, got 0", "--parallel", "0"),
		bc("--parallel 2: the ssh provider's hosts take one run at a time", "--provider", "ssh", "--parallel", "2")},
	"matrix --shard": {bc(`--shard: want I/N with 1 ≤ I ≤ N, such as 2/4, got "0/2"`, "--shard", "0/2")},
	"matrix --json":  {bc("--json: stat STORE/nodir: no such file or directory", "--json", "STORE/nodir/m.json")},
	"matrix --baseline": {bc("--baseline: open STORE/nodir: no such file or directory", "--baseline", "STORE/nodir"),
		bc("--baseline: STORE/bad.yaml: invalid character", "--baseline", "STORE/bad.yaml")},

	"merge --out":          {bc("--out: STORE/file is not a folder", "--out", "STORE/file/out")},
	"merge --json":         {bc("--json: stat STORE/nodir: no such file or directory", "--json", "STORE/nodir/m.json")},
	"merge --junit":        {bc("--junit: STORE is a folder", "--junit", "STORE")},
	"merge --findings":     {bc("--findings: stat STORE/nodir: no such file or directory", "--findings", "STORE/nodir/f.md")},
	"merge --track-record": {bc("--track-record: stat STORE/nodir: no such file or directory", "--track-record", "STORE/nodir/t.md")},
	"merge --bugs":         {bc("--bugs: open STORE/nodir/b.yaml: no such file or directory", "--bugs", "STORE/nodir/b.yaml")},
	"merge --max-rate":     {bc(`--max-rate must be a rate between 0 and 100%, such as 15% or 0.15, got "0"`, "--max-rate", "0")},
	"merge --md":           {bc("--md is for matrix stores; a scoreboard takes --findings", "--md", "STORE/m.md")},
	"merge --baseline":     {bc("--baseline is for matrix stores; a scoreboard has none", "--baseline", "STORE/file")},
	"merge --compare":      {bc("--compare: open STORE/nodir/scoreboard.json: no such file or directory", "--compare", "STORE/nodir/scoreboard.json")},

	"margin --vary": {bc("--vary NAME=FROM..TO is required", "--vary", ""),
		bc(`--vary "speed=1..2": want NAME=FROM..TO with NAME one of clock-bump, clock-rate, delay, down, pause, targets, ttl, window`, "--vary", "speed=1..2"),
		bc(`--vary pause: the range "1s" is not FROM..TO`, "--vary", "pause=1s"),
		bc(`--vary pause: "fast" is not a duration (e.g. 1.5s)`, "--vary", "pause=fast..2s"),
		bc("--vary pause: the range 2s..1s must go up from 0 or more", "--vary", "pause=2s..1s"),
		bc(`--vary clock-rate: "0" is not a positive rate (e.g. 0.5)`, "--vary", "clock-rate=0..0.9"),
		bc("--vary clock-rate: the range 0.5..1.5 holds 1, the real rate, which is no fault: vary below it or above it", "--vary", "clock-rate=0.5..1.5"),
		bc("--faults none: margin varies one fault (a combined fault a+b counts as one): give exactly one", "--vary", "pause=1s..2s"),
		bc("--vary down: pause-client does not read it (it reads pause, pause-point)", "--faults", "pause-client", "--vary", "down=1s..2s"),
		bc("--vary targets=1..9: redis-set-nx-px has 1 nodes", "--faults", "pause-client", "--vary", "targets=1..9"),
		bc("--pause and --vary pause=… both set it: give one", "--faults", "pause-client", "--pause", "2s")},
	"margin --faults": {bc(`--faults: unknown fault "meteor" (known: bridge, `, "--faults", "meteor"),
		bc("--faults pause-client,kill-node: margin varies one fault (a combined fault a+b counts as one): give exactly one", "--faults", "pause-client,kill-node"),
		bc("--vary pause: pause-node+kill-node does not read it (it reads window, down)", "--faults", "pause-node+kill-node")},
	// A run's flags that locktest run checks only when it sets up: the
	// search's first run meets them, and the search leaves nothing.
	"margin --profile": withFault(bc("--profile: mkdir STORE/file: not a directory", "--profile", "STORE/file/p")),
	"margin --inventory": append(withFault(bc("inventory STORE/none.yaml: no such file or directory", "--provider", "ssh", "--inventory", "STORE/none.yaml"),
		bc("inventory STORE/bad.yaml:1: field scenarios not found", "--provider", "ssh", "--inventory", "STORE/bad.yaml")),
		bc("--client-addresses and --insecure-ignore-host-key need --provider ssh", "--inventory", "STORE/lab.yaml")),
	"margin --hosts": append(withFault(bc("--hosts: entry 2: no address", "--provider", "ssh", "--hosts", "a,,b")),
		bc("--inventory and --hosts both name the hosts: give one", "--provider", "ssh", "--hosts", "a", "--inventory", "STORE/lab.yaml")),
	"margin --ssh-key": withFault(bc("ssh a: key: open STORE/nokey: no such file or directory", "--provider", "ssh", "--hosts", "a", "--insecure-ignore-host-key", "--ssh-key", "STORE/nokey"),
		bc("ssh a: key STORE/file: ssh: no key found", "--provider", "ssh", "--hosts", "a", "--insecure-ignore-host-key", "--ssh-key", "STORE/file")),
	"margin --client-addresses": append(withFault(bc(`--client-addresses: entry 1 "x": want an IPv4 address or a CIDR block`, "--provider", "ssh", "--hosts", "a", "--client-addresses", "x")),
		bc("--ssh-user, --ssh-key, --known-hosts and --client-addresses go with --hosts", "--provider", "ssh", "--inventory", "STORE/lab.yaml", "--client-addresses", "10.0.0.9"),
		bc("--client-addresses and --insecure-ignore-host-key need --provider ssh", "--client-addresses", "10.0.0.9")),
	"margin --known-hosts": withFault(bc("ssh: known_hosts STORE/none: no such file or directory", "--provider", "ssh", "--hosts", "a", "--known-hosts", "STORE/none")),
	// A run's flags that the search sets itself in every trial.
	"margin --expect":            {bc("--expect: margin decides each trial itself (a trial fails when its run finds a safety violation); give no --expect", "--faults", "pause-client", "--expect", "valid")},
	"margin --interval":          {bc("--interval: margin injects one pinned fault --at its offset, so there is no quiet time between faults; give no --interval", "--faults", "pause-client", "--interval", "1s")},
	"margin --stop-on-violation": {bc("--stop-on-violation: every trial stops soon after its first violation already; give no --stop-on-violation", "--faults", "pause-client", "--stop-on-violation")},
	"margin --gate": {bc(`--gate: "soon" is not a duration (e.g. 1.5s) (a value of --vary pause)`, "--faults", "pause-client", "--gate", "soon"),
		bc(`--gate: "-1" is not a positive rate (e.g. 0.5) (a value of --vary clock-rate)`, "--faults", "clock-rate-client", "--vary", "clock-rate=0.5..0.9", "--gate", "-1")},
	"margin --json":       {bc("--json: ", "--faults", "pause-client", "--json", "STORE/nodir/m.json")},
	"margin --trials":     {bc("--trials must be at least 1, got 0", "--trials", "0")},
	"margin --grid":       {bc("--grid must be at least 2, got 1", "--grid", "1")},
	"margin --resolution": {bc("--resolution must be positive, got 0s", "--resolution", "0")},
	"margin --at":         {bc("--at must not be negative, got -1s", "--at", "-1s")},
	"margin --budget":     {bc("--budget must not be negative, got -1s", "--budget", "-1s")},
	"margin --store":      {bc("--store: mkdir STORE/file: not a directory", "--faults", "pause-client", "--store", "STORE/file")},
	"shrink --replays":    {bc("--need 2 of --replays 1: want 1 ≤ need ≤ replays", "--replays", "1")},
	"shrink --need":       {bc("--need 0 of --replays 3: want 1 ≤ need ≤ replays", "--need", "0"), bc("--need 4 of --replays 3", "--need", "4")},
	"run --plan": {bc("--plan: open STORE/nodir/p.yaml: no such file or directory", "--plan", "STORE/nodir/p.yaml"),
		bc("--plan STORE/plan-field.yaml: line 2: field colour not found in type scenarios.PlanFile", "--plan", "STORE/plan-field.yaml"),
		bc("--plan STORE/plan-setting.yaml: run: line 4: field speed not found", "--plan", "STORE/plan-setting.yaml"),
		bc("--plan STORE/plan-value.yaml: run: line 3: cannot unmarshal !!str `many` into int", "--plan", "STORE/plan-value.yaml"),
		bc("--plan STORE/plan-impl.yaml: run: impl is given by the plan's impls list", "--plan", "STORE/plan-impl.yaml"),
		bc("--plan STORE/plan-two.yaml: impls and clients name 2 locks, and locktest run tests one: give --impl or --client", "--plan", "STORE/plan-two.yaml"),
		bc("--plan STORE/plan-seeds.yaml: seeds: locktest run makes one run per trial; seeds are a matrix's", "--plan", "STORE/plan-seeds.yaml"),
		bc("--plan STORE/plan-margin.yaml: margin and gates.margin are a margin search's; locktest run makes one run", "--plan", "STORE/plan-margin.yaml"),
		bc(`--faults: unknown fault "meteor"`, "--plan", "STORE/plan-fault.yaml")},
	"margin --plan": {bc("--plan: open STORE/nodir/p.yaml: no such file or directory", "--plan", "STORE/nodir/p.yaml"),
		bc("--plan STORE/plan-setting.yaml: run: line 4: field speed not found", "--plan", "STORE/plan-setting.yaml"),
		bc("--plan STORE/plan-two.yaml: impls and clients name 2 locks, and locktest margin tests one: give --impl or --client", "--plan", "STORE/plan-two.yaml"),
		bc("--plan STORE/plan-seeds.yaml: seeds: locktest margin makes one run per trial; seeds are a matrix's", "--plan", "STORE/plan-seeds.yaml")},
	"matrix --plan": {bc("--plan STORE/plan-work.yaml: run: work: the matrix sets it itself for each fault class (a plan gives it ttl, time, clients, persistence, resource, cluster-opt, impl-opt)", "--plan", "STORE/plan-work.yaml"),
		bc(`--resource must be fenced, none in a matrix, got "check-and-set"`, "--plan", "STORE/plan-resource.yaml"),
		bc("--plan STORE/plan-margin.yaml: margin and gates.margin are a margin search's; locktest matrix runs none", "--plan", "STORE/plan-margin.yaml")},
	"run --json":       {bc("--json: ", "--json", "STORE/nodir/r.json")},
	"check --json":     {bc("--json: ", "--json", "STORE/nodir/r.json")},
	"list --json":      {bc("--json: ", "--json", "STORE/nodir/l.json")},
	"shrink --json":    {bc("--json: ", "--json", "STORE/nodir/s.json")},
	"shrink --confirm": {bc("--confirm must not be negative, got -1", "--confirm", "-1")},
	"shrink --budget":  {bc("--budget must not be negative, got -1s", "--budget", "-1s")},
	"shrink --grace":   {bc("--grace must not be negative, got -1s", "--grace", "-1s")},
	"shrink --store":   {bc("--store: STORE/file is not a folder", "--store", "STORE/file"), bc("--store: stat STORE/file/s: not a directory", "--store", "STORE/file/s")},

	"images build --node-binary": {bc("--node-binary STORE/nodir: not an executable file", "--node-binary", "STORE/nodir")},

	"lab up --count":     {bc("--count 2: want 5 to 100", "--count", "2"), bc("--count 101: want 5 to 100", "--count", "101")},
	"lab up --dir":       {bc("--dir: mkdir STORE/file: not a directory", "--dir", "STORE/file/lab")},
	"lab down --dir":     {bc("--dir STORE/nodir: not a folder", "--dir", "STORE/nodir")},
	"cleanup --provider": {bc(`cleanup --provider "docker": want ssh`, "--provider", "docker"), bc("cleanup --provider ssh needs --inventory FILE", "--provider", "ssh")},
	"cleanup --inventory": {bc("--inventory and --insecure-ignore-host-key need --provider ssh", "--inventory", "STORE/lab.yaml"),
		bc("inventory STORE/none.yaml: no such file or directory", "--provider", "ssh", "--inventory", "STORE/none.yaml")},
}

// badPlans are plan files with one mistake each, written into STORE for
// the --plan cases.
var badPlans = map[string]string{
	"plan-field.yaml":    "impls: [redis-set-nx-px]\ncolour: red\n",
	"plan-setting.yaml":  "impls: [redis-set-nx-px]\nrun:\n  ttl: 1s\n  speed: 3\n",
	"plan-value.yaml":    "impls: [redis-set-nx-px]\nrun:\n  clients: many\n",
	"plan-impl.yaml":     "run:\n  impl: redlock\n",
	"plan-two.yaml":      "impls: [redis-set-nx-px, redlock]\n",
	"plan-seeds.yaml":    "impls: [redis-set-nx-px]\nseeds: 5\n",
	"plan-resource.yaml": "impls: [redis-set-nx-px]\nrun:\n  resource: check-and-set\n",
	"plan-work.yaml":     "impls: [redis-set-nx-px]\nrun:\n  work: 1s\n",
	"plan-margin.yaml":   "impls: [redis-set-nx-px]\nmargin:\n  vary: pause=0s..1s\n",
	"plan-fault.yaml":    "impls: [redis-set-nx-px]\nfaults: [meteor]\n",
}

// anyValue are flags that take every value of their type, with the reason;
// they get only the automatic case of a value that does not parse.
var anyValue = map[string]string{
	"run --seed":       "every int64 is a seed",
	"debate --seed":    "every int64 is a first seed",
	"shrink --anomaly": "any name may be a kind; one the run lacks is refused once the run is read (TestShrinkRefusesWhatItCannotShrink)",
}

// badBase are the arguments each command gets before a case's: a valid
// command line, so that only the case's value is wrong.
var badBase = map[string][]string{
	"run":          {"run", "--store", "STORE", "--time", "2s"},
	"debate":       {"debate", "--only", "redis-naive-del", "--seeds", "1", "--store", "STORE"},
	"matrix":       {"matrix", "--impl", "redis-set-nx-px", "--faults", "none", "--time", "2s", "--store", "STORE"},
	"cleanup":      {"cleanup"},
	"check":        {"check", "STORE"},
	"images build": {"images", "build", "redis"},
	"merge":        {"merge", "STORE/file"},
	"shrink":       {"shrink", "STORE/nodir"},
	"margin":       {"margin", "--store", "STORE", "--time", "2s", "--vary", "pause=100ms..1s"},
}

// flagsOf returns the flags of c, help and the old names of flags
// (deprecated, each another name of a flag that is listed) aside.
func flagsOf(c *cobra.Command) []*pflag.Flag {
	var out []*pflag.Flag
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name != "help" && f.Deprecated == "" {
			out = append(out, f)
		}
	})
	return out
}

// TestEveryFlagRefusesABadValue runs every command with each bad value of
// each of its flags. Each must exit 2 with one line on stderr that names
// the flag and says what is wrong, leave stdout and the store empty, and
// start nothing: PATH is empty, so a bad value that slipped through would
// fail later with another message.
func TestEveryFlagRefusesABadValue(t *testing.T) {
	emptyPath := t.TempDir()
	type tc struct {
		name string
		cmd  string
		args []string
		want string
	}
	var cases []tc
	for path, c := range visibleCommands() {
		for _, f := range flagsOf(c) {
			key := path + " --" + f.Name
			hand, hasHand := badValues[key]
			_, isAny := anyValue[key]
			if !hasHand && !isAny && path == "margin" {
				// margin takes a run's flags and checks them as run does.
				hand, hasHand = badValues["run --"+f.Name]
				_, isAny = anyValue["run --"+f.Name]
			}
			if auto := unparsable(f); auto != "" {
				cases = append(cases, tc{key + " " + auto, path, []string{"--" + f.Name + "=" + auto},
					fmt.Sprintf("invalid argument %q for %q flag", auto, flagTitle(f))})
			} else if !hasHand && !isAny {
				t.Errorf("%s has no bad value in badValues: add one (or say in anyValue why every value is good)", key)
			}
			if f.Value.Type() != "bool" && !hasHand && !isAny {
				t.Errorf("%s has no out-of-range value in badValues: add one (or say in anyValue why every value is good)", key)
			}
			for _, b := range hand {
				cases = append(cases, tc{key + " " + strings.Join(b.args, " "), path, b.args, b.want})
			}
		}
	}
	for key := range badValues {
		if _, ok := visibleCommands()[strings.SplitN(key, " --", 2)[0]]; !ok || !strings.Contains(key, " --") {
			t.Errorf("badValues has %q, which is no flag of a command", key)
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Each case is one command of its own, with a store of its
			// own, that exits at once: the cases run two at a time.
			t.Parallel()
			root := t.TempDir()
			if err := os.WriteFile(filepath.Join(root, "file"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			bad := "scenarios:\n  - name: a\n    colour: red\n"
			if err := os.WriteFile(filepath.Join(root, "bad.yaml"), []byte(bad), 0o644); err != nil {
				t.Fatal(err)
			}
			for name, text := range badPlans {
				if err := os.WriteFile(filepath.Join(root, name), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			base, ok := badBase[c.cmd]
			if !ok {
				base = strings.Fields(c.cmd)
			}
			args := append(append([]string{}, base...), c.args...)
			for i := range args {
				args[i] = strings.ReplaceAll(args[i], "STORE", root)
			}
			want := strings.ReplaceAll(c.want, "STORE", root)
			stdout, stderr, code := locktestEnv(t, []string{"PATH=" + emptyPath}, args...)
			if code != 2 || !strings.HasPrefix(stderr, "locktest: ") || strings.Count(stderr, "\n") != 1 ||
				!strings.Contains(stderr, want) || strings.Contains(stderr, "goroutine") {
				t.Fatalf("locktest %s: exit %d, stderr %q; want exit 2 and one line containing %q", strings.Join(args, " "), code, stderr, want)
			}
			t.Logf("locktest %s\n%s", strings.Join(args[len(base):], " "), stderr)
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
			if ents, _ := os.ReadDir(root); len(ents) != 2+len(badPlans) {
				t.Errorf("the refused command left %d entries in the store", len(ents)-2-len(badPlans))
			}
		})
	}
}

// unparsable returns a value that flag f's type refuses, or "" for a type
// that takes every string.
func unparsable(f *pflag.Flag) string {
	switch f.Value.Type() {
	case "int", "int64", "duration", "float64":
		return "x"
	case "bool":
		return "maybe"
	}
	return ""
}

// flagTitle is how pflag names f in its errors: "--ttl", or "-q, --quiet".
func flagTitle(f *pflag.Flag) string {
	if f.Shorthand != "" {
		return "-" + f.Shorthand + ", --" + f.Name
	}
	return "--" + f.Name
}

// locktestEnv is locktest with env added to the environment.
func locktestEnv(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	return cli.Run(t, env, args...)
}

// leftovers lists the processes whose command line holds one of marks.
func leftovers(marks ...string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		cl := strings.ReplaceAll(string(b), "\x00", " ")
		for _, m := range marks {
			if strings.Contains(cl, m) && alive(atoi(e.Name())) {
				out = append(out, e.Name()+": "+cl)
			}
		}
	}
	return out
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// fakeServer writes an executable script named name into a new folder and
// returns the folder.
func fakeServer(t *testing.T, name, script string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestServerThatFailsAtStartExitsTwo starts runs whose server binary (first
// on PATH) exits at once, or never answers. Each run must end with one line
// naming the node and why, exit 2, and nothing left running; the run's
// folder is kept, since the line quotes the node's log in it, and says in
// results.json that the run could not start.
func TestServerThatFailsAtStartExitsTwo(t *testing.T) {
	gate.Need(t, "redis-server")
	tests := []struct {
		name, script string
		want         []string
	}{
		{"exits 1", `echo "FATAL: cannot open the config" >&2; exit 1`,
			[]string{"start redis cluster: local redis: node n1 (pid ", "exited during start-up (exit status 1)", "FATAL: cannot open the config"}},
		{"never answers", `exec sleep 600`,
			[]string{"start redis cluster: local redis: node n1 (pid ", "not ready"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := fakeServer(t, "redis-server", tt.script)
			root := t.TempDir()
			stdout, stderr, code := locktestEnv(t, []string{"PATH=" + fake + ":" + os.Getenv("PATH")},
				"run", "--store", root, "--time", "2s", "--name", "fake")
			if code != 2 || strings.Count(stderr, "\n") != 1 || stdout != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 and one line", code, stdout, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q lacks %q", stderr, w)
				}
			}
			if left := leftovers(fake, root); len(left) > 0 {
				t.Errorf("left running: %v", left)
			}
			// A log the line names is there to read.
			if m := regexp.MustCompile(`(/\S+\.log)`).FindStringSubmatch(stderr); m != nil {
				if _, err := os.Stat(m[1]); err != nil {
					t.Errorf("the error names %s: %v", m[1], err)
				}
				dirs, _ := filepath.Glob(filepath.Join(root, "fake", "2*"))
				if len(dirs) != 1 {
					t.Fatalf("run folders %v, want the one the error names", dirs)
				}
				r, err := runstore.ReadResults(dirs[0])
				if err != nil || r.Valid != "unknown" || len(r.Problems) != 1 || !strings.HasPrefix(r.Problems[0], "the run could not start: ") {
					t.Errorf("results of a run that could not start: %+v, %v", r, err)
				}
			} else if ents, _ := os.ReadDir(root); len(ents) != 0 {
				t.Errorf("a run that could not start, whose error names no file, left %d entries in the store", len(ents))
			}
		})
	}
}

// TestStoreThatCannotBeWrittenExitsTwo points --store at a regular file and
// at a read-only file system: one line naming the store, exit 2, nothing
// started.
func TestStoreThatCannotBeWrittenExitsTwo(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	stores := map[string]string{"a file": file}
	ro := filepath.Join(dir, "ro")
	if err := os.Mkdir(ro, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", ro, "tmpfs", syscall.MS_RDONLY, "size=64k"); err == nil {
		t.Cleanup(func() { _ = syscall.Unmount(ro, 0) })
		stores["read-only"] = ro
	} else {
		t.Logf("no read-only tmpfs (%v): only the file case runs", err)
	}
	for name, root := range stores {
		t.Run(name, func(t *testing.T) {
			stdout, stderr, code := locktest(t, "run", "--store", root, "--time", "2s")
			want := map[string]string{"a file": "not a directory", "read-only": "read-only file system"}[name]
			if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 ||
				!strings.HasPrefix(stderr, "locktest: store: mkdir "+root) || !strings.Contains(stderr, want) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 and one line: store: mkdir %s/...: %s", code, stdout, stderr, root, want)
			}
			if left := leftovers(root); len(left) > 0 {
				t.Errorf("left running: %v", left)
			}
		})
	}
}

// smallTmpfs mounts a tmpfs of size on a temporary folder, unmounted when
// the test ends, and returns the folder; it skips t where no tmpfs can be
// mounted (root needed).
func smallTmpfs(t *testing.T, size string) string {
	t.Helper()
	root := t.TempDir()
	if err := syscall.Mount("tmpfs", root, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a tmpfs (root needed): %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(root, 0); err != nil {
			t.Errorf("unmount %s: %v", root, err)
		}
	})
	return root
}

// TestMatrixOnASmallDiskIsRefused points a 5-seed matrix's store at a
// tmpfs with room for a few runs: one line that says what it found, exit
// 2, and no run started.
func TestMatrixOnASmallDiskIsRefused(t *testing.T) {
	root := smallTmpfs(t, "64m")
	store := filepath.Join(root, "store")
	stdout, stderr, code := locktest(t, "matrix", "--impl", "redis-set-nx-px", "--seeds", "5", "--store", store, "-q")
	if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 ||
		!strings.Contains(stderr, "the disk of the store "+store+" has 64 MB free") || !strings.Contains(stderr, "give --store on another disk") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 and one line saying the store's disk has 64 MB free", code, stdout, stderr)
	}
	if ents, _ := os.ReadDir(store); len(ents) != 0 {
		t.Errorf("the refused matrix left %d entries in its store", len(ents))
	}
}

// TestDiskFullEndsTheRunUnknown runs against a store on a small tmpfs that
// fills during the run. The run must end unknown (exit 3), never valid, say
// why on stdout, leave a history of whole lines that `locktest check` reads, and
// leave nothing running.
func TestDiskFullEndsTheRunUnknown(t *testing.T) {
	gate.Need(t, "redis-server")
	root := smallTmpfs(t, "256k")
	stdout, stderr, code := locktest(t, "run", "--store", root, "--time", "3s", "--name", "full")
	if code != 3 || !strings.HasPrefix(stderr, "locktest: inconclusive, expected valid: ") || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("exit %d, stderr %q; want 3 (inconclusive) and one line with the reason\n%s", code, stderr, stdout)
	}
	for _, w := range []string{"run problem: history: write ", "no space left on device", "keeps its first ",
		"verdict: unknown (expected valid)", "report: not written"} {
		if !strings.Contains(stdout, w) {
			t.Errorf("stdout lacks %q:\n%s", w, stdout)
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(root, "full", "2*"))
	if len(dirs) != 1 {
		t.Fatalf("run folders %v, want one", dirs)
	}
	// results.json still says what the run wrote at its start: unknown.
	r, err := runstore.ReadResults(dirs[0])
	if err != nil || r.Valid != "unknown" {
		t.Errorf("results.json: %v, %v; want unknown", r.Valid, err)
	}
	if _, err := os.Stat(filepath.Join(dirs[0], runstore.ResultsFile+".tmp")); err == nil {
		t.Errorf("a half-written results.json.tmp was left")
	}
	// The history file is whole lines: the ops up to the failed write.
	h, err := history.ReadFile(filepath.Join(dirs[0], runstore.HistoryFile))
	if err != nil || len(h) == 0 {
		t.Fatalf("history: %d ops, %v", len(h), err)
	}
	m := regexp.MustCompile(`keeps its first (\d+) ops`).FindStringSubmatch(stdout)
	if m == nil || m[1] != strconv.Itoa(len(h)) {
		t.Errorf("the problem says the file keeps %v ops; it has %d", m, len(h))
	}
	if total := regexp.MustCompile(`(\d+) ops, `).FindStringSubmatch(stdout); total == nil || atoi(total[1]) <= len(h) {
		t.Errorf("the run checked %v ops, the file has %d: the run should have checked more than the disk took", total, len(h))
	}
	if left := leftovers(root, bin+" worker"); len(left) > 0 {
		t.Errorf("left running: %v", left)
	}
}
