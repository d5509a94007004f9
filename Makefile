# adaptsched — build, test, benchmark, demo.
# `make test` is go vet and go test -race: it installs OpenBLAS when run as
# root on Debian and it is missing, and otherwise goes on without it (the
# tests that need a missing library skip, naming it). CI runs `make ci`
# (.ci/run): it also installs the HIP runtime, makes the tests that load
# either library fail rather than skip, and checks the cgo-free and cross
# builds (`make portable`). `make demo` needs nothing beyond Go. `make ops`
# and `make bench` run on whatever this machine has: they name the
# libraries that are missing (the CPU backend then uses its pure-Go matmul,
# the GPU backend reports itself unavailable) and go on.

GO        ?= go
# TEST_PKGS: OpenBLAS, dlopen'ed by the CPU backend's CBLAS path (make test
# installs it as root). CI_PKGS: the 236 MB HIP runtime (hiprtc inside)
# for the ROCm backend's loader and kernel-compile tests, and Debian's
# nats-server 2.9 (the fleet must work against it: TestDebianServer),
# installed by make ci only: a user's make test does not pull them in.
TEST_PKGS ?= libopenblas0
CI_PKGS   ?= libamdhip64-5 nats-server
DEB_PKGS  ?= $(TEST_PKGS) $(CI_PKGS)
# Platforms whose builds of every package and command make portable checks.
CROSS     ?= darwin/arm64 windows/amd64 linux/arm64
BENCHTIME ?= 300ms

.PHONY: all build deps testdeps libs test vet portable ci bench demo ops peer clean

all: build

build:
	$(GO) build ./...

# deps installs DEB_PKGS where missing (as root on Debian) or fails.
deps:
	@missing=""; \
	for p in $(DEB_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "make: installing Debian packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null || exit 1; \
	  else \
	    echo "make: missing Debian packages:$$missing (install them, or run make as root)"; exit 1; \
	  fi; \
	fi

# testdeps installs TEST_PKGS as deps does where it can, and otherwise
# says what is missing and goes on: the tests that need it skip.
testdeps:
	@if command -v dpkg >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	  $(MAKE) --no-print-directory deps DEB_PKGS="$(TEST_PKGS)" || \
	    echo "make: could not install $(TEST_PKGS); the tests that need it skip"; \
	else \
	  $(MAKE) --no-print-directory libs DEB_PKGS="$(TEST_PKGS)"; \
	fi

# libs names the runtime libraries that are missing, without failing: the
# programs that would load them report the backend or path unavailable.
libs:
	@if ! command -v dpkg >/dev/null 2>&1; then \
	  echo "make: not a Debian system: OpenBLAS and HIP are used only if found at run time"; \
	else \
	  missing=""; \
	  for p in $(DEB_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	  if [ -n "$$missing" ]; then echo "make: missing Debian packages:$$missing; going on without them (make deps installs them, as root)"; fi; \
	fi

vet:
	$(GO) vet ./...

# -timeout: cmd/infer's tests take 180-570 s under -race on a shared
# 2-core machine, against go test's default limit of 600 s a package.
test: testdeps vet
	$(GO) test -race -timeout 20m ./...

# portable checks the builds the docs promise besides this one: without
# cgo (its tests run, the GPU backend's unavailable path among them) and
# every package and command for each of CROSS.
portable:
	CGO_ENABLED=0 $(GO) vet ./...
	CGO_ENABLED=0 $(GO) test ./backends/...
	@for t in $(CROSS); do \
	  echo "GOOS=$${t%/*} GOARCH=$${t#*/} $(GO) build ./..."; \
	  GOOS=$${t%/*} GOARCH=$${t#*/} $(GO) build ./... || exit 1; \
	done

# ci is what .ci/run runs on a clean checkout without GPU: every runtime
# library installed, a test that needs one fails when it cannot load it
# (ADAPTSCHED_REQUIRE_LIBS), then the portable builds.
ci:
	@$(MAKE) --no-print-directory deps
	ADAPTSCHED_REQUIRE_LIBS=1 $(MAKE) --no-print-directory test
	@$(MAKE) --no-print-directory portable

# bench runs every benchmark once and writes BENCHMARKS.md (the targets
# table, docs/targets.csv naming each target's benchmark, and every figure)
# and docs/TUNING.md (bandit's BenchmarkTuning grid) through cmd/benchmd.
# The store's Select+Observe over 10,000 buckets runs apart, for SLOWTIME:
# the flush that writes its changed buckets comes about once a second, so
# a 300 ms run either catches one or not. `go run ./cmd/benchmd` alone
# re-renders both files from the figures already in BENCHMARKS.md. A run
# in which something failed writes the other figures, names what failed
# and fails, leaving bench.out (ignored by git) to read.
SLOWBENCH ?= SelectObserve/10k-buckets
SLOWTIME  ?= 3s
bench: libs
	$(GO) test -run '^$$' -bench . -skip '$(SLOWBENCH)' -benchtime $(BENCHTIME) -timeout 60m ./... 2>&1 | tee bench.out
	$(GO) test -run '^$$' -bench '$(SLOWBENCH)' -benchtime $(SLOWTIME) -timeout 20m ./history 2>&1 | tee -a bench.out
	$(GO) run ./cmd/benchmd -in bench.out -out BENCHMARKS.md -targets docs/targets.csv -tuning docs/TUNING.md
	@rm -f bench.out

# demo replays the embedded trace, recorded from a simulated mixed-serving
# run, through every placement policy, prints the comparison and writes
# the plot to replay.png.
demo:
	$(GO) run ./cmd/replay -plot replay.png

# peer runs adaptsched and StarPU (dmda) side by side on the same stream
# of matmuls, both choosing between the same two implementations
# (bench/peer): it installs StarPU's and OpenBLAS's development packages,
# builds the StarPU program, and runs PEER_ROUNDS rounds in alternation.
PEER_PKGS   ?= libstarpu-dev libopenblas-dev pkg-config
PEER_ROUNDS ?= 5
PEER_BIN    ?= bin/peer_starpu
peer:
	@$(MAKE) --no-print-directory deps DEB_PKGS="$(TEST_PKGS) $(PEER_PKGS)"
	@mkdir -p $(dir $(PEER_BIN))
	$(CC) -O3 -Wall -o $(PEER_BIN) bench/peer/starpu/peer_starpu.c bench/peer/peerkern.c \
	  $$(pkg-config --cflags --libs starpu-1.3) -ldl
	$(GO) run ./cmd/peer -starpu $(PEER_BIN) -stream bench/peer/testdata/stream.txt -rounds $(PEER_ROUNDS)

# ops runs every op on every backend available here and prints µs.
ops: libs
	$(GO) run ./cmd/opdemo

clean:
	rm -f bench.out replay.png $(PEER_BIN)
