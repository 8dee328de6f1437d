# regosched — common tasks. `make help` lists them.
SHELL := /bin/bash
GO ?= go
# The release version has one source, the VERSION file: both binaries embed
# it, and the images and the chart are stamped with it. The commit is stamped
# too, since -trimpath builds from an export carry no VCS information.
VERSION := $(shell cat VERSION)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X github.com/regosched/regosched/internal/plumbing/version.commit=$(COMMIT)
GOLANGCI_LINT := $(GO) run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0
OPA := $(GO) tool opa
# Pinned tools run through the Go module proxy, outside go.mod; their first
# build takes minutes and is cached by Go after.
HELM := $(GO) run helm.sh/helm/v4/cmd/helm@v4.3.2
KUSTOMIZE := $(GO) run sigs.k8s.io/kustomize/kustomize/v5@v5.8.2
PROMTOOL := $(GO) run github.com/prometheus/prometheus/cmd/promtool@v0.316.0
MONITORING := deploy/helm/regosched/files

.PHONY: help build scheduler test tools chart monitoring unit rego fuzz e2e e2e-compat scheduler-test demo lint run bench bench-e2e fmt

help: ## List the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

build: ## Build bin/regosched
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/regosched ./cmd/regosched

scheduler: ## Build bin/regosched-scheduler: kube-scheduler with regosched as a framework plugin (its own module, scheduler/)
	cd scheduler && CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(SCHEDULER_LDFLAGS)" -o ../bin/regosched-scheduler ./cmd/regosched-scheduler

test: tools chart monitoring unit rego fuzz image-check e2e scheduler-test ## Every test: chart, alerts, vet, Go unit tests, Rego checks and tests, a short fuzz run, the images for this machine's platform, end-to-end suites of the extender and of regosched-scheduler

tools: ## Build the pinned helm, kustomize and promtool once (outside any test's timeout)
	$(HELM) version >/dev/null
	$(KUSTOMIZE) version >/dev/null
	$(PROMTOOL) --version >/dev/null

chart: ## helm lint (both modes) and helm template of deploy/helm/regosched, compared object by object with deploy/'s and deploy/plugin's kustomize renders
	$(HELM) lint --strict deploy/helm/regosched
	$(HELM) lint --strict deploy/helm/regosched --set mode=plugin
	$(GO) test -count=1 ./test/deploytest/

monitoring: ## promtool check and unit tests of the alerts; every metric and label the alerts and the dashboard query, against the code
	$(PROMTOOL) check rules $(MONITORING)/prometheus-rules.yaml
	$(PROMTOOL) test rules $(MONITORING)/prometheus-rules_test.yaml
	$(GO) test -count=1 ./test/monitoringtest/

unit: ## go vet (also for macOS and Windows), deploy/validate.sh, and the Go unit tests (these also run the Rego tests through OPA's tester)
	$(GO) vet ./...
	$(GO) vet -tags e2e ./...
	bash hack/cross-vet.sh
	KUSTOMIZE="$(KUSTOMIZE)" bash deploy/validate.sh
	KUSTOMIZE="$(KUSTOMIZE)" bash hack/test-validate-skew.sh
	$(GO) test -race -count=1 ./...
	cd hack/release && $(GO) test -race -count=1 ./...

rego: ## opa fmt, opa check --strict and opa test with coverage on rego/
	$(OPA) fmt --fail --list rego/
	$(OPA) check --strict rego/
	$(OPA) test --bundle --verbose rego/
	$(OPA) test --bundle --coverage --threshold 90 rego/ > /dev/null

# A count, not a duration: with a -fuzztime duration, Go before 1.27 can fail
# a target with a bare "context deadline exceeded" when its workers are busy
# at the deadline (golang/go#75804), which a shared 2-core machine makes common.
FUZZTIME ?= 5000x
FUZZFLAGS = -fuzztime $(FUZZTIME) -fuzzminimizetime 5s
fuzz: ## A short, bounded run of every fuzz target (FUZZTIME executions each; seeds in testdata/)
	@for t in FuzzFilter FuzzPrioritize FuzzPreempt FuzzBind; do \
	  echo "fuzz $$t"; $(GO) test -run '^$$' -fuzz "^$$t$$" $(FUZZFLAGS) ./internal/frontend/extender/ || exit 1; done
	$(GO) test -run '^$$' -fuzz '^FuzzInput$$' $(FUZZFLAGS) ./internal/core/policy/
	$(GO) test -run '^$$' -fuzz '^FuzzRESPValidator$$' $(FUZZFLAGS) ./internal/redis/redisconn/

e2e: ## End-to-end suite on a local control plane (builds etcd, kube-apiserver, kube-scheduler once, cached)
	$(GO) test -tags e2e -count=1 -timeout 40m -v ./test/localcluster/ ./test/localredis/ ./internal/redis/redisroles/ ./internal/ops/repair/ ./test/e2e/
	$(GO) test -tags e2e -count=1 -timeout 10m -run TestCertRollAccessOnAPIServer -v ./test/deploytest/

# Not part of make test: its first control-plane build takes about 16 minutes
# here. regosched-scheduler is a 1.37 kube-scheduler, which the skew policy
# forbids against an older API server, so scheduler-test stays out of it.
e2e-compat: ## End-to-end suite (extender mode) against the previous Kubernetes minor's control plane, 1.36 (docs/compatibility.md)
	REGOSCHED_KUBERNETES=1.36 $(GO) test -tags e2e -count=1 -timeout 60m -v ./test/localcluster/ ./test/localredis/ ./internal/redis/redisroles/ ./internal/ops/repair/ ./test/e2e/

scheduler-test: ## regosched-scheduler: vet, unit tests, and its end-to-end test (preemption of a conflicting peer) on a local control plane
	cd scheduler && $(GO) vet ./... && $(GO) vet -tags e2e ./...
	cd scheduler && $(GO) test -race -count=1 ./...
	cd scheduler && $(GO) test -tags e2e -count=1 -timeout 20m -v ./e2e/

demo: ## Local control plane + regosched + kube-scheduler, a sample workload, a placement table
	$(GO) run ./test/cmd/regosched-demo

lint: ## go mod tidy -diff, go vet and golangci-lint (with and without the e2e build tag), in both modules and hack/release
	$(GO) mod tidy -diff
	cd scheduler && $(GO) mod tidy -diff
	$(GO) vet ./...
	$(GOLANGCI_LINT) run ./...
	$(GOLANGCI_LINT) run --build-tags e2e ./...
	cd scheduler && $(GO) vet ./...
	cd scheduler && $(GOLANGCI_LINT) run ./...
	cd scheduler && $(GOLANGCI_LINT) run --build-tags e2e ./...
	cd hack/release && $(GO) mod tidy -diff && $(GO) vet ./... && $(GOLANGCI_LINT) run ./...

run: build ## Serve against the cluster of your KUBECONFIG, with debug logs
	./bin/regosched serve --log-level=debug

bench: ## Go benchmarks of the hot paths
	$(GO) test -run '^$$' -bench . -benchmem ./...

BENCH_PLOT ?= docs/throughput.png

bench-e2e: ## End-to-end throughput at 1,000 nodes and at 5,000 with 10,000 pods bound: regosched vs native anti-affinity vs no rules, drawn to $(BENCH_PLOT) (ARGS="--points 100:0 ...")
	$(GO) run ./test/cmd/regosched-bench-e2e --plot $(BENCH_PLOT) $(ARGS)

fmt: ## Format Go and Rego
	gofmt -w $$(git ls-files '*.go')
	$(OPA) fmt -w rego/

# --- Images and the release (docs/releasing.md) ---
# make image builds both images from static binaries with hack/release, its
# own module so that go-containerregistry stays out of go.mod: no Docker
# engine and no base image. File times and created are the commit's time,
# so two builds of one commit give the same digests.
.PHONY: image image-test image-check release
PLATFORMS ?= linux/amd64 linux/arm64
DIST := dist
IMAGE_REGISTRY ?= ghcr.io/regosched
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
BUILD_DATE := $(shell date -u -d @$(SOURCE_DATE_EPOCH) +%Y-%m-%dT%H:%M:%SZ 2>/dev/null || date -u -r $(SOURCE_DATE_EPOCH) +%Y-%m-%dT%H:%M:%SZ)
# regosched-scheduler's --version prints k8s.io/component-base's version,
# which only Kubernetes' own build scripts stamp: stamp it with the
# k8s.io/kubernetes release scheduler/go.mod pins. gitCommit is regosched's
# commit, the tree the binary is built from.
KUBERNETES_VERSION := $(shell awk '$$1 == "k8s.io/kubernetes" { print $$2 }' scheduler/go.mod)
KUBE_VERSION_PKG := k8s.io/component-base/version
SCHEDULER_LDFLAGS := $(LDFLAGS) \
  -X $(KUBE_VERSION_PKG).gitVersion=$(KUBERNETES_VERSION) \
  -X $(KUBE_VERSION_PKG).gitMajor=$(word 1,$(subst ., ,$(KUBERNETES_VERSION:v%=%))) \
  -X $(KUBE_VERSION_PKG).gitMinor=$(word 2,$(subst ., ,$(KUBERNETES_VERSION:v%=%))) \
  -X $(KUBE_VERSION_PKG).gitCommit=$(COMMIT) \
  -X $(KUBE_VERSION_PKG).buildDate=$(BUILD_DATE)
# The SBOMs' tool, pinned. It reads GOOS/GOARCH to pick the packages of a
# platform; they are given through go run -exec env, since go run would
# otherwise build the tool itself for that platform. hack/release's sbom
# then drops the hash it gives scheduler/'s replaced root module, a hash of
# the whole checkout (.git and dist/ included) that no one could check.
CYCLONEDX := github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@v1.10.0
CYCLONEDX_FLAGS := app -json -licenses -std -noserial -notimestamp

image: ## OCI images of regosched and regosched-scheduler for PLATFORMS (default linux/amd64 linux/arm64): dist/images/NAME/ (OCI layout, multi-arch index) and dist/images/NAME_VERSION_OS_ARCH.tar (docker load)
	@set -e; for p in $(PLATFORMS); do os=$${p%%/*}; arch=$${p#*/}; bin=$(DIST)/bin/$${os}_$${arch}; \
	  echo "build $$bin/regosched $$bin/regosched-scheduler"; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $$bin/regosched ./cmd/regosched; \
	  (cd scheduler && CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags "$(SCHEDULER_LDFLAGS)" -o ../$$bin/regosched-scheduler ./cmd/regosched-scheduler); \
	done
	@set -e; for i in regosched regosched-scheduler; do \
	  $(GO) -C hack/release run . image -name $$i -version $(VERSION) -revision $(COMMIT) -source-date-epoch $(SOURCE_DATE_EPOCH) \
	    -registry $(IMAGE_REGISTRY) -out $(CURDIR)/$(DIST)/images \
	    $(foreach p,$(PLATFORMS),$(p)=$(CURDIR)/$(DIST)/bin/$(subst /,_,$(p))/$$i); done

image-test: image ## Build the images (PLATFORMS=linux/amd64 for a quick run) and test them: config, labels, and each binary run from the unpacked image as 65532:65532 (needs root)
	cd hack/release && RELEASE_IMAGES=$(CURDIR)/$(DIST)/images $(GO) test -count=1 -v -run 'TestBuiltImages' .

# make test builds and checks the images of this machine's platform only: the
# other platform's cross-builds add minutes and are tested by the same code.
image-check: ## make image-test for this machine's platform only (what make test runs)
	$(MAKE) image-test PLATFORMS=$$($(GO) env GOOS)/$$($(GO) env GOARCH)

release: ## Everything a release publishes, in dist/ (wiped first): images, CycloneDX SBOMs per image and platform, the packaged chart, SHA256SUMS
	@git diff --quiet HEAD -- 2>/dev/null || echo "warning: uncommitted changes: the images are labelled revision $(COMMIT) but built from this work tree"
	rm -rf $(DIST)
	$(MAKE) image
	@set -e; mkdir -p $(DIST)/sbom; for p in $(PLATFORMS); do os=$${p%%/*}; arch=$${p#*/}; sfx=$(VERSION)_$${os}_$${arch}; \
	  echo "sbom regosched_$$sfx regosched-scheduler_$$sfx"; \
	  target="env GOOS=$$os GOARCH=$$arch CGO_ENABLED=0"; \
	  $(GO) run -exec "$$target" $(CYCLONEDX) $(CYCLONEDX_FLAGS) -main cmd/regosched -output $(DIST)/sbom/regosched_$$sfx.cdx.json . ; \
	  (cd scheduler && $(GO) run -exec "$$target" $(CYCLONEDX) $(CYCLONEDX_FLAGS) -main cmd/regosched-scheduler -output ../$(DIST)/sbom/regosched-scheduler_$$sfx.cdx.json .); \
	done
	$(GO) -C hack/release run . sbom -local github.com/regosched/regosched $(CURDIR)/$(DIST)/sbom/regosched-scheduler_*.cdx.json
	@# helm keeps the files' times in the package: package a copy with the commit's time, for one digest per commit.
	chart=$$(mktemp -d) && cp -R deploy/helm/regosched $$chart/ && find $$chart -exec touch -h -d $(BUILD_DATE) {} + && \
	  $(HELM) package $$chart/regosched --version $(VERSION) --app-version $(VERSION) -d $(DIST)/ && rm -rf $$chart
	cd $(DIST) && find . -type f ! -name SHA256SUMS | LC_ALL=C sort | sed 's|^\./||' | xargs sha256sum > SHA256SUMS
	@echo "dist/: $$(wc -l < $(DIST)/SHA256SUMS) files in SHA256SUMS"
