# burstcache build. `make help` lists the targets.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)
GOTEST_FLAGS ?= -timeout 40m

CONTROLLER_GEN = $(shell hack/tool.sh controller-gen)
GOLANGCI_LINT = $(shell hack/tool.sh golangci-lint)

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: ## Generate deepcopy code for the API types.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths="./api/..."

# RBAC and webhook configurations come from markers in controllers/. Until it
# holds Go code, config/rbac/role.yaml and config/webhook/manifests.yaml are
# written by hand, and controller-gen would fail on an empty package pattern.
CONTROLLER_SOURCES = $(shell find controllers -name '*.go' 2>/dev/null)

.PHONY: manifests
manifests: ## Generate CRDs, RBAC and webhook manifests in config/.
	$(CONTROLLER_GEN) crd paths="./api/..." output:crd:artifacts:config=config/crd/bases
ifneq ($(strip $(CONTROLLER_SOURCES)),)
	$(CONTROLLER_GEN) rbac:roleName=manager webhook paths="./controllers/..." paths="./csi-driver/..." \
		output:rbac:artifacts:config=config/rbac output:webhook:artifacts:config=config/webhook
endif

.PHONY: fmt
fmt: ## Run gofmt on the code.
	gofmt -s -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: lint
lint: ## Run golangci-lint (with the import rules of .golangci.yml).
	$(GOLANGCI_LINT) run ./...

.PHONY: chart
chart: ## Generate charts/burstcache (CRDs, templates, README) from config/.
	hack/chart.sh

.PHONY: verify
verify: generate manifests chart ## Check that generated files and formatting are up to date.
	@test -z "$$(gofmt -s -l $$(git ls-files '*.go'))" || { echo "gofmt needed on:"; gofmt -s -l $$(git ls-files '*.go'); exit 1; }
	@git diff --exit-code -- api config || { echo "generated files are out of date: run make generate manifests"; exit 1; }
	@git diff --exit-code -- charts || { echo "the chart is out of date: run make chart"; exit 1; }
	@test -z "$$(git ls-files --others --exclude-standard -- charts)" || { echo "chart files are not committed:"; git ls-files --others --exclude-standard -- charts; exit 1; }
	@test -z "$$(git ls-files --others --exclude-standard -- 'api/**/zz_generated.*.go' config/crd/bases config/rbac config/webhook)" || \
		{ echo "generated files are not committed:"; git ls-files --others --exclude-standard -- 'api/**/zz_generated.*.go' config/crd/bases config/rbac config/webhook; exit 1; }

##@ Try it

.PHONY: quickstart
quickstart: ## Run a standalone cache over a scratch directory, a workload, teardown, and check the bytes (root).
	hack/quickstart.sh

.PHONY: bench
bench: build ## Measure burstcache against the raw directory, a FUSE passthrough and a slow backing store (root).
	go run ./test/bench -burstcache bin/burstcache -out docs/bench

.PHONY: bench-scale
bench-scale: build envtest ## Measure the operator with 1,000 instances on 500 kwok nodes (writes docs/bench/scale.md).
	go run ./test/scale -burstcache bin/burstcache -kwok "$$(hack/tool.sh kwok)" -assets "$(CURDIR)/bin/k8s" -out docs/bench

##@ Build

.PHONY: build
build: ## Build bin/burstcache and the kubectl plugin bin/kubectl-burstcache.
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o bin/burstcache ./cmd/burstcache
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o bin/kubectl-burstcache ./cmd/kubectl-burstcache

.PHONY: image
image: ## Build the burstcache image without Docker: bin/images/burstcache.tar (docker-archive) and an OCI layout.
	VERSION=$(VERSION) COMMIT=$(COMMIT) hack/image.sh

##@ Clusters

.PHONY: cluster-up
cluster-up: ## Start a real single-node Kubernetes on this machine (root; no Docker needed).
	hack/local-cluster.sh up

.PHONY: cluster-down
cluster-down: ## Stop the local cluster and remove everything it made.
	hack/local-cluster.sh down

.PHONY: cluster-load
cluster-load: image ## Import the burstcache image into the local cluster's node.
	hack/local-cluster.sh load bin/images/burstcache.tar

KIND_CLUSTER ?= burstcache

.PHONY: kind-up
kind-up: image ## With Docker and kind: create a kind cluster, load the image and install the chart.
	kind get clusters | grep -qx $(KIND_CLUSTER) || kind create cluster --name $(KIND_CLUSTER)
	kind load image-archive bin/images/burstcache.tar --name $(KIND_CLUSTER)
	$$(hack/tool.sh helm) upgrade --install burstcache charts/burstcache --namespace burstcache-system --create-namespace --wait

##@ Test

.PHONY: envtest
envtest: ## Build kube-apiserver, etcd and kubectl for envtest (cached).
	@hack/envtest.sh >/dev/null

.PHONY: test
test: verify vet envtest build ## Run every test: unit, model-based, envtest, FUSE integration and POSIX suites.
	@hack/net-guard.sh
	KUBEBUILDER_ASSETS="$(CURDIR)/bin/k8s" BURSTCACHE_BIN="$(CURDIR)/bin/burstcache" \
		go test $(GOTEST_FLAGS) ./...
	@# The data path again under the race detector, the FUSE mount's own
	@# tests included: they map files of a mount they serve only in child
	@# processes, so no test waits on a fault that its own process answers.
	BURSTCACHE_BIN="$(CURDIR)/bin/burstcache" \
		go test -race $(GOTEST_FLAGS) ./cacheserver/...

.PHONY: test-e2e
test-e2e: image ## Run test/e2e against $$KUBECONFIG or, if none answers, the local cluster (started if needed; root).
	hack/e2e.sh
