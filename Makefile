# locktest — make targets. `make setup` needs root on Debian/Ubuntu (apt-get).
GO      ?= go
BIN     := bin/locktest
STORE   ?= store
export PATH := /usr/local/go/bin:$(PATH)

.PHONY: readme-samples setup build demo test test-unit test-local test-docker test-ssh lint bench clean debate findings soak track-record kube-apiserver

# setup installs the lock servers and tools locktest starts, where they are
# missing (scripts/setup lists them).
setup:
	@command -v $(GO) >/dev/null || { echo "setup: Go is missing: install Go 1.26 into /usr/local/go"; exit 2; }
	@scripts/setup

build:
	$(GO) build -buildvcs=auto -o $(BIN) ./cmd/locktest

# demo: the GC pause of the debate against a single Redis lock, first with a
# resource that trusts the lock (a violation is expected), then with a
# fenced resource (the stale writes are rejected).
demo: setup build
	$(BIN) run --impl redis-set-nx-px --faults pause-client --resource none \
		--ttl 500ms --time 10s --work 5ms --interval 1s --expect invalid --store $(STORE) -q
	$(BIN) run --impl redis-set-nx-px --faults pause-client --resource fenced \
		--ttl 500ms --time 10s --work 5ms --interval 1s --expect valid --store $(STORE) -q
	@echo "reports: $(STORE)/*/latest/report.html"

# readme-samples runs the demo again and puts its output in README.md as
# its sample (SAMPLES=all: the debate's sample too, about 22 minutes).
readme-samples: setup build
	BIN=$(BIN) scripts/readme-samples

# test runs every test against real servers, also in containers and over
# the ssh lab. The tests are in parts by what they need (docs/testing.md).
# go test starts packages in the order given, so the longest come first,
# in the order of their measured times (docs/testing.md), and the short
# ones fill the places the long ones leave at the end. Three run at once
# (-p 3; the default is one per core): most of a test's time is a run's
# timed workload, which waits, and at two at a time the cores were a
# third idle (docs/testing.md). go vet ./... has vetted every package and
# its tests before, so go test does not vet them again (-vet=off): its own
# vet of each test package took 106 s of CPU of the suite's 2,839
# (docs/testing.md, where the suite's time goes). The timeout bounds a
# hang: e2e/ssh took up to 19.6 minutes beside the rest under stress-ng
# (docs/reliability.md).
test: setup
	$(GO) vet ./...
	$(GO) test -count=1 -p 3 -vet=off -timeout 30m ./e2e/ssh ./e2e/redis ./clients ./cmd/locktest ./e2e/quorum ./e2e/netns ./clusters/docker ./e2e/docker ./clusters/local ./run ./clusters/ssh ./checker ./guards ./e2e/sql ./matrix ./...

# test-unit needs no server, no root and no Docker: every test that needs
# more goes through a gate (testkit/gate), which skips it under -short.
test-unit:
	$(GO) test -count=1 -short -timeout 5m ./...

# test-local runs the tests of the local provider and everything else that
# needs no Docker engine (LOCKTEST_WITHOUT=docker skips those that do).
test-local: setup
	LOCKTEST_WITHOUT=docker $(GO) test -count=1 -timeout 20m ./cmd/locktest ./clients ./e2e/netns ./e2e/redis ./e2e/quorum ./e2e/sql ./...

# test-docker runs the docker provider's tests: its runs, its engine and
# images, and the CLI's runs in containers.
test-docker: setup
	$(GO) test -count=1 -timeout 20m ./e2e/docker ./clusters/docker ./clusters/engine ./clusters/images ./clusters/sshlab
	$(GO) test -count=1 -timeout 20m -run 'Docker|ReportSaysWhatRanTheNodes' ./cmd/locktest

# test-ssh runs the ssh provider's tests over a lab of containers
# (`locktest lab up`): its runs, the command over it (the debate, Ctrl-C,
# cleanup), and its connections.
test-ssh: setup
	$(GO) test -count=1 -timeout 30m ./e2e/ssh ./clusters/ssh

# debate runs the whole scenario catalogue at the seeds that decide (16
# each, after which a safe scenario with no violation is held at 15%; about
# 18 minutes on 2 cores) and writes the scoreboard into the store. It exits
# 0 only when every scenario was reproduced or held.
debate: setup build
	$(BIN) debate --store $(STORE)

# findings regenerates docs/findings.md from a full run of the catalogue,
# 20 seeds per scenario, 4 runs at once (22 minutes on 2 cores, as
# docs/findings.md's header says).
findings: setup build
	$(BIN) debate --seeds 20 --parallel 4 --store $(STORE) --findings docs/findings.md

# repro-NAME loops over seeds until scenario NAME shows what it tests for,
# and says whether it did (locktest debate --list names the scenarios).
repro-%: setup build
	@$(BIN) debate --store $(STORE) --only $* --seeds $(or $(SEEDS),10) --until-reproduced \
		&& echo "repro-$*: reproduced" || { echo "repro-$*: NOT reproduced (see the scoreboard above)"; exit 1; }

# bug-ID reproduces public bug ID of scenarios/bugs.yaml: its scenarios,
# on the version that has the bug and on the one that fixed it, 10 seeds
# each (SEEDS=N for more), with the track record's table of them
# (docs/track-record.md lists the bugs).
bug-%: setup build
	@$(BIN) debate --store $(STORE) --scenarios scenarios/bugs.yaml --only $* --seeds $(or $(SEEDS),10)

# track-record regenerates docs/track-record.md (and the board it is made
# from, docs/track-record.json) from every bug of scenarios/bugs.yaml, 10
# seeds per scenario; BUG=ID measures that bug's scenarios again and puts
# their rows over the board, leaving the other bugs' rows as they were.
track-record: setup build
	$(BIN) debate --scenarios scenarios/bugs.yaml --seeds $(or $(SEEDS),10) --parallel 2 --store $(STORE) \
		$(if $(BUG),--only $(BUG) --over docs/track-record.json) --track-record docs/track-record.md

# kube-apiserver builds the kubernetes backend's apiserver from the Go
# module proxy into locktest's cache, once (about 32 minutes on 2 cores;
# docs/backends.md). Not part of setup or test: without it the kubernetes
# backend's tests skip, naming this target.
kube-apiserver:
	scripts/build-kube-apiserver

# soak interrupts 100 seeded runs at random moments (SIGINT, SIGTERM, SIGKILL
# followed by locktest cleanup) and checks that none leaves anything behind
# and that every history gets a verdict (docs/reliability.md). Not part of
# test; SOAK_ARGS passes options, e.g. SOAK_ARGS='-n 10 --seed 7'.
soak: setup build
	scripts/soak $(SOAK_ARGS)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

bench: setup
	$(GO) test -run '^$$' -bench . -benchtime 1x ./...

clean:
	rm -rf bin $(STORE)
