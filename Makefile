# vh5fs — see README.md.
GO      ?= go
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)

.PHONY: all deps build install uninstall demo test fuzz bench clean

# Installation directories (GNU conventions; DESTDIR stages a package root).
PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
MANDIR     ?= $(PREFIX)/share/man
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
DOCDIR     ?= $(PREFIX)/share/doc/vh5fs
# BIN is the built binary; install reuses it unless a source changed, so that
# `make && sudo make install` needs no Go toolchain on root's PATH.
BIN        ?= bin/vh5fs
SOURCES    := go.mod go.sum $(shell find . -path ./bench -prune -o -path ./tests -prune -o \
                -type f \( -name '*.go' -o -name '*.c' -o -name '*.h' \) ! -name '*_test.go' -print)

all: build

deps:
	@scripts/deps.sh

build: deps
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/vh5fs

$(BIN): $(SOURCES)
	@scripts/deps.sh
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/vh5fs

# The binary, its man page and bash completion. mount -t fuse.vh5fs needs vh5fs on /bin/sh's
# default PATH, which /usr/local/bin (the default BINDIR) is.
install: $(BIN)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(DOCDIR)
	install -m 0755 $(BIN) $(DESTDIR)$(BINDIR)/vh5fs
	install -m 0644 docs/vh5fs.1 $(DESTDIR)$(MANDIR)/man1/vh5fs.1
	install -m 0644 scripts/vh5fs.bash-completion $(DESTDIR)$(BASHCOMPDIR)/vh5fs
	install -m 0644 README.md docs/GUIDE.md LICENSE $(DESTDIR)$(DOCDIR)

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/vh5fs $(DESTDIR)$(MANDIR)/man1/vh5fs.1 $(DESTDIR)$(BASHCOMPDIR)/vh5fs
	rm -rf $(DESTDIR)$(DOCDIR)

# Mount the bundled demo file and show it with ls, od and numpy.
demo: build
	scripts/demo.sh

# Every test, including the ones that really mount with FUSE (needs /dev/fuse and root or
# user_allow_other-free fusermount3); then every package but tests/ again under the race
# detector (-short: without the large files' tests, which run above).
test: deps
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 40m ./...
	$(GO) test -race -short -count=1 $$($(GO) list ./... | grep -v /tests$$)
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
