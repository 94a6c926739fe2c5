# vh5fs — see README.md.
GO      ?= go
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)

.PHONY: all deps build demo test fuzz bench clean

all: build

deps:
	@scripts/deps.sh

build: deps
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o bin/vh5fs ./cmd/vh5fs

# Mount the bundled demo file and show it with ls, od and numpy.
demo: build
	scripts/demo.sh

# Every test, including the ones that really mount with FUSE (needs /dev/fuse and root or
# user_allow_other-free fusermount3).
test: deps
	$(GO) vet ./...
	$(GO) test -count=1 ./...
	$(GO) test -race -count=1 -run Concurrent ./commit
	$(MAKE) --no-print-directory fuzz FUZZTIME=20000x

# Each fuzz target for FUZZTIME (seed corpora run with every `go test` too). `make test` gives
# an execution count: a duration can fail at its deadline without any finding, from a race in
# Go's fuzzing coordinator (golang/go#51484); a count has no deadline.
FUZZTIME ?= 60s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./mountopts
	$(GO) test -run '^$$' -fuzz '^FuzzMetadata$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 0 ./h5meta
	$(GO) test -run '^$$' -fuzz '^FuzzChunkMap$$' -fuzztime $(FUZZTIME) ./versions
	$(GO) test -run '^$$' -fuzz '^FuzzLZF$$' -fuzztime $(FUZZTIME) ./filters
	$(GO) test -run '^$$' -fuzz '^FuzzReadAt$$' -fuzztime $(FUZZTIME) ./staged
	$(GO) test -run '^$$' -fuzz '^FuzzWriteAt$$' -fuzztime $(FUZZTIME) ./staged

# Benchmarks: one table of medians and ratios against the references (see bench/main.go).
# Generated files are cached in $${TMPDIR:-/tmp}/vh5fs-bench.
BENCH_ARGS ?= -suite all
bench: build
	$(GO) run ./bench $(BENCH_ARGS)

clean:
	rm -rf bin
