# Run `make help` for the targets.
PKGS := github.com/agentenv/agentenv/...
GO ?= go
# Pinned code generators for `make proto` (protoc itself: Debian's protobuf-compiler 3.21.12).
PROTOC_GEN_GO := google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
PROTOC_GEN_GO_GRPC := google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
GOBIN_DIR := $(CURDIR)/.tools/bin

.PHONY: help build agentenv-image test test-stress lint proto proto-check bench fuzz k8s-up k8s-down

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

build: ## build bin/agentenv (first-party plugins compiled in) and bin/agentenv-terminal (static)
	$(GO) build -o bin/agentenv ./cmd/agentenv
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o bin/agentenv-terminal ./cmd/agentenv-terminal

agentenv-image: ## agentenv's FROM-scratch image for deploy/kubernetes and GridSim's env image, nothing pulled (scripts/agentenv-image.sh --docker; TAG=dev)
	scripts/agentenv-image.sh --docker --tag $(or $(TAG),dev)

# go test shows nothing of a passing package, skips included: tests that
# lack an outside part (sdktest.Missing) write a line to SKIPS, printed last.
SKIPS := $(CURDIR)/.test-skips
# Packages tested at once (go test -p); the default is the number of cores.
TEST_P ?=

test: ## go test -race over every module of the workspace (TEST_P=n: packages at once)
	@rm -f $(SKIPS); rc=0; \
	AGENTENV_TEST_SKIPS=$(SKIPS) $(GO) test -race -count=1 -timeout 45m $(if $(TEST_P),-p $(TEST_P)) $(PKGS) || rc=$$?; \
	if [ -s $(SKIPS) ]; then \
	  echo; echo "SKIPPED: $$(wc -l <$(SKIPS)) tests need parts this machine lacks (README: What the tests need):"; \
	  sort $(SKIPS); \
	fi; rm -f $(SKIPS); exit $$rc

test-stress: ## the timing-sensitive tests 3 times in a row under a CPU hog (needs stress-ng)
	GO=$(GO) scripts/test-stress.sh

lint: ## gofmt and go vet over every module
	@out=$$(gofmt -l $$($(GO) list -f '{{.Dir}}' $(PKGS))); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

$(GOBIN_DIR)/protoc-gen-go $(GOBIN_DIR)/protoc-gen-go-grpc:
	GOBIN=$(GOBIN_DIR) $(GO) install $(PROTOC_GEN_GO)
	GOBIN=$(GOBIN_DIR) $(GO) install $(PROTOC_GEN_GO_GRPC)

proto: $(GOBIN_DIR)/protoc-gen-go $(GOBIN_DIR)/protoc-gen-go-grpc ## regenerate sdk/internal/pb from sdk/proto
	cd sdk && PATH=$(GOBIN_DIR):$$PATH protoc -I proto \
		--go_out=. --go_opt=module=github.com/agentenv/agentenv/sdk \
		--go-grpc_out=. --go-grpc_opt=module=github.com/agentenv/agentenv/sdk \
		proto/agentenv/plugin/v1/plugin.proto

proto-check: proto ## fail when the committed generated code is stale
	@git diff --exit-code -- sdk/internal/pb || { echo "generated code is stale: run make proto and commit"; exit 1; }

bench: ## run the benchmarks (numbers go in docs/performance.md)
	$(GO) test -run '^$$' -bench . -benchtime 2s $(PKGS)

K8SCLUSTER := $(GO) run ./internal/k8scluster/cmd/k8scluster

k8s-up: ## start the real Kubernetes test cluster (root; builds its binaries once: ~20 min cold on 2 idle cores, up to an hour on a loaded machine)
	$(K8SCLUSTER) up --build

k8s-down: ## stop the test cluster and check nothing of it is left
	$(K8SCLUSTER) down
	$(K8SCLUSTER) check-clean
