# vh5fs — see README.md.
GO      ?= go
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)

.PHONY: all deps build demo test vet clean

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

clean:
	rm -rf bin
