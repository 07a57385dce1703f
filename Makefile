# The single entry point for building, checking and testing planbus.
# `make ci` runs .ci/run; `make test` is the README's test command.

GO          ?= go
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
BIN         := bin

.PHONY: all build run test check links fmt vet staticcheck example fuzz bench bench-scale bench-soak bench-retain soak test-loaded ci smoke images clean

all: check test

build:
	$(GO) build -o $(BIN)/ ./cmd/...

# The main job on the embedded default.
run:
	$(GO) run ./cmd/planner run examples/plans/diamond.json

# Every test, with the race detector.
test:
	$(GO) test -race -count=1 ./...

# The same tests beside stress-ng --cpu 4 on a 2-core machine (the CPU
# oversubscribed three times): every test must stay green; it prints the
# wall time (README, "Development").
test-loaded:
	./scripts/test-loaded

check: fmt vet staticcheck example links

# Every relative link of the README, docs/ and examples/ leads somewhere.
links:
	./scripts/check-links

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

staticcheck:
	$(GO) run $(STATICCHECK) ./...

# examples/custom-skill is a module of its own, built against planbus's
# public packages only (the compiler refuses internal ones across
# modules): vet, build, staticcheck and test it there. Its plan runs
# against planner serve in TestCustomSkillExample (internal/cli).
EXAMPLE := examples/custom-skill
example:
	cd $(EXAMPLE) && GOWORK=off $(GO) vet ./...
	cd $(EXAMPLE) && GOWORK=off $(GO) build -o /dev/null ./...
	cd $(EXAMPLE) && GOWORK=off $(GO) run $(STATICCHECK) ./...
	cd $(EXAMPLE) && GOWORK=off $(GO) test -race -count=1 ./...

# A short run of every fuzz target: FUZZTIME executions each (a count, not
# a duration; see scripts/fuzz). Fails only on a real crasher.
FUZZTIME ?= 50000x
fuzz:
	FUZZTIME=$(FUZZTIME) ./scripts/fuzz

# The DAG benchmark on the built-in workloads (internal/bench/workloads);
# WORKLOADS=DIR runs the *.json files of another directory.
# BENCH_FLAGS adds flags (--sync 1s, --procs --dispatchers 2, --runs 7...).
WORKLOADS ?=
BENCH_FLAGS ?=
bench:
	$(GO) run ./cmd/planner bench $(if $(WORKLOADS),--workloads $(WORKLOADS)) $(BENCH_FLAGS)

# The scaling curves: chain-10/100/1000, fanout-100/1000/10000/50000 and
# many-plans-100/1000/5000, generated on the fly (docs/benchmarks.md).
bench-scale:
	$(GO) run ./cmd/planner bench --scale $(BENCH_FLAGS)

# A steady-rate soak: BENCH_RATE plans a second for BENCH_SOAK, RSS sampled
# every 10 s, ending with whether it plateaued.
BENCH_SOAK ?= 10m
BENCH_RATE ?= 200
bench-soak:
	$(GO) run ./cmd/planner bench --soak $(BENCH_SOAK) --rate $(BENCH_RATE) $(BENCH_FLAGS)

# One node retaining RETAIN_PLANS five-tool plans (default 1,000,000) at
# the default 24 h retention and --sync: a soak of RETAIN_PLANS/RETAIN_RATE
# seconds, RSS and the live heap sampled every minute, their slopes per
# plan taken after 11 minutes (past the 10-minute duplicate window), ending
# with what the process held
# (docs/benchmarks.md, "A million retained plans"), under the soft memory
# limit planner serve sets. About 45 minutes at the default rate, which a
# 2-core node at --sync always holds only with BENCH_FLAGS=--partitions 1
# (docs/deploy.md, Known issues); BENCH_FLAGS adds flags (--memprofile FILE).
RETAIN_PLANS ?= 1000000
RETAIN_RATE  ?= 375
bench-retain:
	$(GO) build -o $(BIN)/ ./cmd/planner
	$(BIN)/planner bench --soak $$(( $(RETAIN_PLANS) / $(RETAIN_RATE) ))s --rate $(RETAIN_RATE) --sample 1m --warm-up 11m --serve-memory-limit $(BENCH_FLAGS)

# The soak: SOAK_PLANS plans (diamonds, chains, retries, hard failures whose
# side effects a ledger skill appends and fsyncs) on real processes while
# workers and dispatchers are killed -9 every ~3 s and the embedded server
# twice. It prints submitted / terminal / lost and the duplicate side
# effects by cause, and fails on any loss and on any completed call run
# again (docs/deploy.md, "The soak").
SOAK_PLANS ?= 1000
soak:
	$(GO) test -count=1 -run '^TestSoak$$' -v -timeout 30m ./internal/cli/ -soak.plans $(SOAK_PLANS)

# The planbus:dev image, FROM scratch, from static binaries built here.
images:
	./scripts/build-images

# The compose stack: build images from static binaries, run a plan, tear down.
smoke:
	./scripts/compose-smoke

ci:
	./.ci/run

clean:
	rm -rf $(BIN) dist
