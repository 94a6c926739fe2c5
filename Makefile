# vh5fs — see README.md.
GO      ?= go
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)

.PHONY: all deps build hdf5-info install uninstall demo test test-hdf5 test-hdf5-1.14 fuzz bench clean

# HDF5: found through pkg-config (Debian's libhdf5-dev, Homebrew's and conda's hdf5), or at
# HDF5_DIR, an installation's prefix (its include/ and lib/; run-time path set). vh5fs uses
# the API of the headers it finds, 1.10 through 2.x: nothing else to choose.
HDF5_DIR ?=
ifneq ($(HDF5_DIR),)
HDF5_PC := $(CURDIR)/bin/hdf5-pc
export PKG_CONFIG_PATH := $(HDF5_PC)
# In CPPFLAGS: ahead of every package's own -I (gonum's names Debian's), and in the key of
# Go's build cache, which does not hash pkg-config's answers.
export CGO_CPPFLAGS := -I$(HDF5_DIR)/include
export CGO_LDFLAGS := -O2 -g -L$(HDF5_DIR)/lib -Wl,-rpath,$(HDF5_DIR)/lib
ifneq ($(shell scripts/hdf5-pc.sh '$(HDF5_DIR)' '$(HDF5_PC)' >&2 && echo ok),ok)
$(error HDF5_DIR=$(HDF5_DIR) is not an HDF5 installation)
endif
endif

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

build: deps hdf5-info
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/vh5fs

$(BIN): $(SOURCES)
	@scripts/deps.sh
	@$(MAKE) --no-print-directory hdf5-info
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/vh5fs

# Which HDF5 the build uses.
hdf5-info:
	@pkg-config --exists hdf5 || { echo "HDF5 not found: install libhdf5-dev (or your system's hdf5), or give HDF5_DIR=PREFIX" >&2; exit 1; }
	@echo "building against HDF5 $$(pkg-config --modversion hdf5) ($$(pkg-config --cflags-only-I hdf5 | sed 's/^ *-I//;s/ *$$//'))"

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

# The packages that call libhdf5, and the mount tests of reads, commits and history edits,
# against the HDF5 at HDF5_DIR (test-hdf5-1.14: 1.14 built from Debian's source once, kept
# in HDF5_1_14_DIR).
HDF5_1_14_DEB ?= 1.14.6+repack-2
HDF5_1_14_DIR ?= $(HOME)/.cache/vh5fs/hdf5-1.14.6
HDF5_MOUNT_TESTS := TestFixturesThroughMount|TestString.*|TestLatestFormat.*|TestGoldenThroughMount|TestWrites|TestStageGolden|TestCmdFsck|TestCmdDelete|TestDeleteThroughMount|TestRenameVersion|TestMoveCurrent|TestTagsThroughMount|TestBranchAdvances|TestCompact|TestModifyGoldens|TestNumpyAgainstH5py|TestKillDuringSync
test-hdf5-1.14:
	@scripts/hdf5-build.sh $(HDF5_1_14_DEB) $(HDF5_1_14_DIR)
	@$(MAKE) --no-print-directory test-hdf5 HDF5_DIR=$(HDF5_1_14_DIR)

test-hdf5: deps hdf5-info
	@test -n "$(HDF5_DIR)" || { echo "test-hdf5: give HDF5_DIR=PREFIX" >&2; exit 2; }
	$(GO) vet ./h5
	$(GO) test -count=1 ./h5 ./h5meta ./versions ./commit ./history ./fsck
	$(GO) test -count=1 -timeout 30m -run '^($(HDF5_MOUNT_TESTS))$$' ./tests

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
