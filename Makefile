# pico-connectors. `make test` is what CI runs; it installs what it needs first (make setup).
GO        ?= go
TOOLS     := $(CURDIR)/.tools/bin
export PATH := $(TOOLS):$(PATH)
TEST_TIMEOUT ?= 20m

.PHONY: all build generate check-generated vet compat apicompat test test-short demo bench reliability fuzz tools setup image clean

all: build

## build: compile every package and the two binaries into bin/
build:
	$(GO) build ./...
	$(GO) build -o bin/picogen ./cmd/picogen
	$(GO) build -o bin/pico-connectors ./cmd/pico-connectors

## generate: regenerate config packages, docs and runtime schemas from schemas/
generate:
	$(GO) generate ./...

## check-generated: regenerate, then fail if anything committed differs (drift check)
check-generated: generate
	@git diff --exit-code -- generated schemas || { \
	  echo "generated files are out of date: run 'make generate' and commit the result" >&2; exit 1; }
	@test -z "$$(git status --porcelain -- generated schemas)" || { \
	  git status --short -- generated schemas; \
	  echo "picogen wrote files that are not committed: run 'make generate' and commit them" >&2; exit 1; }

## vet: go vet and gofmt
vet:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); test -z "$$out" || { echo "not gofmt'd:"; echo "$$out"; exit 1; }

## compat: fail on schema changes that break existing definition files,
## against COMPAT_BASE (default: where this branch left origin/main)
COMPAT_BASE ?= $(shell git merge-base origin/main HEAD 2>/dev/null || echo HEAD)
compat:
	$(GO) run ./cmd/picogen compat --base $(COMPAT_BASE)

## apicompat: fail on incompatible Go API changes of the SDK's public packages
## (sdk, sdk/confgen, sdk/sdktest, runtime/confkit, runtime/cli) against
## COMPAT_BASE that CHANGELOG.md does not list under the next version
apicompat:
	$(GO) run ./cmd/picogen apicompat --base $(COMPAT_BASE)

## test: installs what the tests need (setup), then drift check, vet, schema and API
## compatibility, then every test against real servers
test: setup check-generated vet compat apicompat
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...

## test-short: the fast subset, without the long crash and soak tests
test-short:
	$(GO) test -short -count=1 ./...

## demo: random source -> embedded broker -> S3 sink -> local S3 server
demo:
	bash examples/demo/run.sh

# One progress line per step, with the time, as .ci/run prints them.
STEP = printf '\n==> %s (%s)\n' "$(1)" "$$(date -u +%H:%M:%S)"

## tools: install the S3 servers the tests and the demo use into .tools/bin: versitygw, and
## MinIO for the S3 sink's tests of what versitygw lacks (SSE-S3/SSE-KMS with a KMS key, SSE-C
## over TLS, STS AssumeRole); keep its version equal to s3test.InstallMinio
MINIO_VERSION := v0.0.0-20260212201848-7aac2a2c5b7c
tools:
	@test -x $(TOOLS)/versitygw || { $(call STEP,go install versitygw into .tools/bin (about 70 s)); \
	  GOBIN=$(TOOLS) $(GO) install github.com/versity/versitygw/cmd/versitygw@v1.8.0; }
	@test -x $(TOOLS)/minio || { $(call STEP,go install minio into .tools/bin (about 4 min)); \
	  GOBIN=$(TOOLS) $(GO) install github.com/minio/minio@$(MINIO_VERSION); }

## setup: what `make test` needs on a fresh Debian machine, installing only what is missing:
## the Debian packages (as root with apt-get; otherwise it prints the one apt-get line to run
## and stops) and the Go-installed servers (tools). Each need is "what shows it is there:package".
SETUP_DEBS := gcc:gcc git:git kcat:kcat chromium:chromium \
  /usr/lib/postgresql/15/bin/initdb:postgresql-15 /etc/ssl/certs/ca-certificates.crt:ca-certificates
setup:
	@missing=; for need in $(SETUP_DEBS); do \
	  what=$${need%:*}; \
	  case $$what in /*) test -e $$what ;; *) command -v $$what >/dev/null ;; esac || missing="$$missing $${need##*:}"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then \
	    echo "make setup: Debian packages missing; as root run: apt-get install -y --no-install-recommends$$missing" >&2; exit 1; \
	  fi; \
	  $(call STEP,apt-get install$$missing); \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null || exit 1; \
	fi
	@$(MAKE) --no-print-directory tools

## image: the container image as one tarball, dist/pico-connectors.oci.tar, built by a Go
## program with no container daemon; the same commit gives the same digest.
## docker load -i / podman load -i it, or crane push it to a registry.
IMAGE_TAG ?= picomq/pico-connectors:latest
image:
	$(GO) run ./cmd/pico-image --out dist/pico-connectors.oci.tar --tag $(IMAGE_TAG)

clean:
	rm -rf bin site dist

## bench: one table of measured figures against same-run baselines (≈5 min)
bench: tools
	$(GO) run ./cmd/pico-bench --markdown bench.md --png bench.png

## reliability: kill, fault and bad-input scenarios against real servers
reliability: tools
	$(GO) run ./cmd/pico-reliability $(RELIABILITY_FLAGS)

## fuzz: every go test -fuzz target in the repo, FUZZTIME each (CI: 10000x).
## Budgets are counts of runs, not durations: with a duration, Go 1.26's fuzz
## coordinator can fail a target with a bare "context deadline exceeded" at the
## deadline (golang/go#75804, fixed in Go 1.27), and a count has no deadline.
## Minimising each new input is capped the same way (FUZZMINIMIZE runs).
FUZZTIME ?= 10000x
FUZZMINIMIZE ?= 100x
fuzz:
	@git grep -h -n -E '^func Fuzz[A-Za-z0-9_]+\(' -- '*_test.go' >/dev/null || { echo "no fuzz targets" >&2; exit 1; }
	@git grep -n -E '^func Fuzz[A-Za-z0-9_]+\(' -- '*_test.go' | while IFS=: read -r file _ rest; do \
	  name=$$(printf '%s' "$$rest" | sed -E 's/^func (Fuzz[A-Za-z0-9_]+).*/\1/'); \
	  pkg=./$$(dirname "$$file"); \
	  echo "==> fuzz $$name in $$pkg for $(FUZZTIME)"; \
	  $(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) "$$pkg" || exit 1; \
	done
