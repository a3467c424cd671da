# gitea-runner-operator: build, lint and test.
#
#   make test   runs everything CI runs: lint, unit tests, the image's test,
#               the chart's tests, the end-to-end suite on a local
#               control plane and Gitea, and the demo on the same bed.
#   make demo   brings the test bed up and shows runners serving Gitea jobs.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/gitea-runner-operator/gitea-runner-operator/internal/cli.Version=$(VERSION)
CACHE := $(CURDIR)/.cache
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(CACHE)/staticcheck-$(STATICCHECK_VERSION)/staticcheck
# controller-gen is pinned in its tools module; the cache is keyed by that pin.
CONTROLLER_GEN_VERSION := $(shell awk '$$1 == "sigs.k8s.io/controller-tools" { print $$2 }' scripts/tools/controller-gen/go.mod)
CONTROLLER_GEN := $(CACHE)/controller-gen-$(CONTROLLER_GEN_VERSION)/controller-gen
# actionlint checks the CI workflow files (.github/workflows); pinned in its
# tools module, cached by that pin.
ACTIONLINT_VERSION := $(shell awk '$$1 == "github.com/rhysd/actionlint" { print $$2 }' scripts/tools/actionlint/go.mod)
ACTIONLINT := $(CACHE)/actionlint-$(ACTIONLINT_VERSION)/actionlint
# cosign signs the release image and attests its SBOM when COSIGN_KEY is
# given (make release), and the release e2e test verifies both; pinned in its
# tools module, cached by that pin. A big build: make cosign builds it once.
COSIGN_VERSION := $(shell awk '$$1 == "github.com/sigstore/cosign/v2" { print $$2 }' scripts/tools/cosign/go.mod)
COSIGN := $(CACHE)/cosign-$(COSIGN_VERSION)/cosign
CHART := charts/gitea-runner-operator
# What `make generate` writes; verify-generated fails when it differs from git.
GENERATED := crds $(CHART)/files/crds ':(glob)internal/api/**/zz_generated.*.go'
# The e2e suite drives a real API server, Gitea and scaler pods; it bounds
# itself, and this bounds it again. Each area is a test binary; all run at
# once, and e2e.Parallel and e2e.Exclusive (internal/e2e/share.go) share the
# bed among them, so a binary's timeout covers the waits for the others.
E2E_TIMEOUT ?= 40m
E2E_AREAS ?= 9

.PHONY: build
build: ## Build the scaler into bin/.
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o bin/gitea-runner-scaler ./cmd/gitea-runner-scaler

# The release image (scripts/tools/image): an OCI image layout in
# $(IMAGE_DIR), one image per platform of IMAGE_PLATFORMS under one index,
# named $(VERSION) in the layout. The creation time is the commit's, so one
# commit gives one digest.
IMAGE_DIR := bin/image
IMAGE_PLATFORMS ?= linux/$(shell go env GOARCH)
IMAGE_SOURCE := https://github.com/gitea-runner-operator/gitea-runner-operator
IMAGE_REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
IMAGE_CREATED ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
# The CA bundle the image ships; the release's SBOM lists it by checksum.
IMAGE_CA := /etc/ssl/certs/ca-certificates.crt

.PHONY: image
image: ## Build the scaler's OCI image into bin/image without Docker (IMAGE_PLATFORMS="linux/amd64 linux/arm64" for more).
	@bins=(); for p in $(IMAGE_PLATFORMS); do os=$${p%%/*}; arch=$${p##*/}; \
	  out=bin/image-build/$$os-$$arch/gitea-runner-scaler; \
	  echo "build $$p"; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch go build -trimpath -ldflags '$(LDFLAGS)' -o $$out ./cmd/gitea-runner-scaler; \
	  bins+=(-binary "$$p=$(CURDIR)/$$out"); done; \
	cd scripts/tools/image && go run -mod=readonly . -out $(CURDIR)/$(IMAGE_DIR) "$${bins[@]}" \
	  -ca $(IMAGE_CA) -rootfs rootfs \
	  -source $(IMAGE_SOURCE) -version $(VERSION) -revision $(IMAGE_REVISION) -created $(IMAGE_CREATED)

# The release: make release VERSION=x.y.z REGISTRY=ghcr.io/OWNER builds
# the image for RELEASE_PLATFORMS (make image), writes its SPDX SBOM from
# the binaries' Go build information, pushes the image to
# $(REGISTRY)/gitea-runner-scaler:$(VERSION) with the SBOM attached as an OCI
# referrer, pins a copy of the chart to the pushed digest, and pushes it to
# oci://$(REGISTRY)/charts. What it made stays in bin/release. Both pushes
# use docker's credentials ($$DOCKER_CONFIG/config.json, as `docker login`
# writes it); RELEASE_PLAIN_HTTP=true speaks plain HTTP (the test bed's
# registry, TestReleasePushesAnImageAndAChartPinnedToItsDigest).
#
# COSIGN_KEY=path signs the pushed image and attests its SBOM (SPDX) with
# that cosign key; cosign reads the key's password from COSIGN_PASSWORD in
# the environment, never from the command line. COSIGN_TLOG_UPLOAD=false
# keeps the signatures out of the public transparency log (the bed has no
# way out). Keyless signing is the release workflow's (.github/workflows).
#
# The default runner image (Gitea's, named in Chart.yaml's
# artifacthub.io/images) is pinned in the released chart's
# scaler.runnerImage by the digest its registry serves at release time
# (release digest); RELEASE_RUNNER_DIGEST=sha256:... gives it instead (the
# test bed, which cannot reach Docker Hub).
RELEASE_PLATFORMS ?= linux/amd64 linux/arm64
COSIGN_KEY ?=
COSIGN_TLOG_UPLOAD ?= true
RELEASE_COSIGN_FLAGS = --yes --key $(COSIGN_KEY) --tlog-upload=$(COSIGN_TLOG_UPLOAD) \
  $(if $(filter true,$(RELEASE_PLAIN_HTTP)),--allow-insecure-registry --allow-http-registry)
RELEASE_DIR := bin/release
RELEASE_PLAIN_HTTP ?= false
RELEASE_IMAGE = $(REGISTRY)/gitea-runner-scaler
RELEASE_TOOL := go run -mod=readonly ./release
RELEASE_RUNNER_IMAGE = $(shell sed -n '/- name: gitea-runner$$/{n;s/^ *image: //p;}' $(CHART)/Chart.yaml)
RELEASE_RUNNER_DIGEST ?=

.PHONY: release
release: $(if $(COSIGN_KEY),$(COSIGN)) ## Push the image (amd64, arm64) with its SBOM and the chart pinned to its digest: VERSION=x.y.z REGISTRY=host/path.
	@[[ "$(VERSION)" =~ ^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$$ ]] || \
	  { echo "release: VERSION must be x.y.z or x.y.z-pre without a leading v (got '$(VERSION)'): make release VERSION=0.2.0 REGISTRY=ghcr.io/you"; exit 2; }
	@[[ -n "$(REGISTRY)" ]] || { echo "release: REGISTRY is required: make release VERSION=$(VERSION) REGISTRY=ghcr.io/you"; exit 2; }
	$(MAKE) --no-print-directory image VERSION=$(VERSION) IMAGE_PLATFORMS="$(RELEASE_PLATFORMS)"
	rm -rf $(RELEASE_DIR) && mkdir -p $(RELEASE_DIR)
	cd scripts/tools/image && $(RELEASE_TOOL) sbom -layout $(CURDIR)/$(IMAGE_DIR) -version $(VERSION) -repository $(RELEASE_IMAGE) \
	  $(foreach p,$(RELEASE_PLATFORMS),-binary $(p)=$(CURDIR)/bin/image-build/$(subst /,-,$(p))/gitea-runner-scaler) \
	  -source $(IMAGE_SOURCE) -created $(IMAGE_CREATED) -out $(CURDIR)/$(RELEASE_DIR)/gitea-runner-scaler-$(VERSION).spdx.json \
	  -ca $(IMAGE_CA) -ca-version "$$(dpkg-query -W -f='$${Version}' ca-certificates 2>/dev/null)"
	cd scripts/tools/image && $(RELEASE_TOOL) push -layout $(CURDIR)/$(IMAGE_DIR) -version $(VERSION) -repository $(RELEASE_IMAGE) \
	  -sbom $(CURDIR)/$(RELEASE_DIR)/gitea-runner-scaler-$(VERSION).spdx.json -plain-http=$(RELEASE_PLAIN_HTTP) \
	  -digest-file $(CURDIR)/$(RELEASE_DIR)/image.digest
	$(if $(COSIGN_KEY),$(COSIGN) sign $(RELEASE_COSIGN_FLAGS) $(RELEASE_IMAGE)@$$(cat $(RELEASE_DIR)/image.digest) && \
	  $(COSIGN) attest $(RELEASE_COSIGN_FLAGS) --type spdxjson \
	    --predicate $(RELEASE_DIR)/gitea-runner-scaler-$(VERSION).spdx.json $(RELEASE_IMAGE)@$$(cat $(RELEASE_DIR)/image.digest))
	cd scripts/tools/image && runner_digest="$(RELEASE_RUNNER_DIGEST)" && \
	  if [ -z "$$runner_digest" ]; then runner_digest="$$($(RELEASE_TOOL) digest -ref $(RELEASE_RUNNER_IMAGE))"; fi && \
	  $(RELEASE_TOOL) chart -chart $(CURDIR)/$(CHART) -out $(CURDIR)/$(RELEASE_DIR)/chart/gitea-runner-operator \
	  -version $(VERSION) -repository $(RELEASE_IMAGE) -digest "$$(cat $(CURDIR)/$(RELEASE_DIR)/image.digest)" \
	  -runner-digest "$$runner_digest"
	eval "$$(scripts/install-helm.sh --print-env)"; export HELM_REGISTRY_CONFIG="$${DOCKER_CONFIG:-$$HOME/.docker}/config.json"; \
	  helm lint --strict $(RELEASE_DIR)/chart/gitea-runner-operator; \
	  helm package $(RELEASE_DIR)/chart/gitea-runner-operator --destination $(RELEASE_DIR); \
	  helm push $(RELEASE_DIR)/gitea-runner-operator-$(VERSION).tgz oci://$(REGISTRY)/charts $(if $(filter true,$(RELEASE_PLAIN_HTTP)),--plain-http)
	@echo "release $(VERSION): image $(RELEASE_IMAGE):$(VERSION)@$$(cat $(RELEASE_DIR)/image.digest) (SBOM attached$(if $(COSIGN_KEY),; signed and attested with $(COSIGN_KEY)))," \
	  "chart oci://$(REGISTRY)/charts/gitea-runner-operator --version $(VERSION), files in $(RELEASE_DIR)"

.PHONY: test-image
test-image: image ## Build the image, read it back and run its binary's version.
	cd scripts/tools/image && IMAGE_LAYOUT=$(CURDIR)/$(IMAGE_DIR) IMAGE_VERSION=$(VERSION) IMAGE_REVISION=$(IMAGE_REVISION) \
	  go test -count=1 ./...

$(STATICCHECK):
	GOBIN=$(dir $@) go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

$(CONTROLLER_GEN):
	cd scripts/tools/controller-gen && go build -mod=readonly -o $@ \
	  -ldflags '-X sigs.k8s.io/controller-tools/pkg/version.version=$(CONTROLLER_GEN_VERSION)' \
	  sigs.k8s.io/controller-tools/cmd/controller-gen

$(ACTIONLINT):
	cd scripts/tools/actionlint && go build -mod=readonly -trimpath -o $@ \
	  -ldflags '-s -w -X github.com/rhysd/actionlint.version=$(ACTIONLINT_VERSION)' github.com/rhysd/actionlint/cmd/actionlint

$(COSIGN):
	cd scripts/tools/cosign && nice go build -mod=readonly -trimpath -o $@ \
	  -ldflags '-s -w -X sigs.k8s.io/release-utils/version.gitVersion=$(COSIGN_VERSION)' github.com/sigstore/cosign/v2/cmd/cosign

.PHONY: cosign
cosign: $(COSIGN) ## Build cosign (pinned in scripts/tools/cosign) into .cache; make release and the release e2e test use it.
	@echo $(COSIGN)

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Write the CRD (crds/ and the chart's copy), its API reference and DeepCopy methods from internal/api/v1alpha1.
	$(CONTROLLER_GEN) object crd:headerFile=scripts/tools/controller-gen/crd-header.yaml,generateEmbeddedObjectMeta=true paths=./internal/api/... output:crd:dir=crds
	cd scripts/tools/controller-gen && go run -mod=readonly ./finishcrd $(CURDIR)/crds/*.yaml
	$(CHART)/hack/sync-crds.sh
	$(APIDOC)

.PHONY: verify-generated
verify-generated: generate ## Fail when make generate changes, adds or removes a committed file.
	@if ! git diff --exit-code -- $(GENERATED) || [ -n "$$(git status --porcelain -- $(GENERATED))" ]; then \
	  git status --short -- $(GENERATED); \
	  echo "verify-generated: the files above differ from what make generate writes from internal/api/v1alpha1;"; \
	  echo "verify-generated: run make generate and commit the result (never edit crds/ by hand)."; \
	  exit 1; \
	fi

# Generated docs: the chart README's values table and facts (chartdoc, from
# values.yaml's "## " comments and Chart.yaml) and the RunnerGroup API
# reference next to the CRD (apidoc, from the Go types' doc comments and
# markers). verify-docs fails when they differ from git.
DOCS := $(CHART)/README.md crds/README.md
APIDOC := cd scripts/tools/docs && go run -mod=readonly ./apidoc -pkg $(CURDIR)/internal/api/v1alpha1 -kind RunnerGroup -out $(CURDIR)/crds/README.md

.PHONY: docs
docs: ## Write the chart README's generated parts (from values.yaml, Chart.yaml) and crds/README.md (the RunnerGroup API reference).
	cd scripts/tools/docs && go run -mod=readonly ./chartdoc $(CURDIR)/$(CHART)
	$(APIDOC)

.PHONY: verify-docs
verify-docs: docs ## Fail when make docs changes a committed file.
	@if ! git diff --exit-code -- $(DOCS) || [ -n "$$(git status --porcelain -- $(DOCS))" ]; then \
	  git status --short -- $(DOCS); \
	  echo "verify-docs: the files above differ from what make docs writes from values.yaml, Chart.yaml and internal/api/v1alpha1;"; \
	  echo "verify-docs: run make docs and commit the result (edit the comments in those sources, not the generated text)."; \
	  exit 1; \
	fi

.PHONY: check-links
check-links: ## Every relative link and #anchor in every *.md of the repository resolves (GitHub's anchor rules).
	cd scripts/tools/docs && go run -mod=readonly ./mdlinks $(CURDIR)

.PHONY: lint
lint: $(STATICCHECK) $(ACTIONLINT) verify-docs check-links ## gofmt, go vet and staticcheck (with the e2e tag, which builds every file), actionlint, generated docs, Markdown links.
	@out=$$(gofmt -l $$(git ls-files '*.go') ); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	@# With the e2e tag every package is checked: no file is built only
	@# without it (a //go:build !e2e file would need the untagged runs back).
	@! git grep -l '^//go:build.*!e2e' -- '*.go' || { echo "lint: a file builds only without the e2e tag: vet and staticcheck it untagged too"; exit 1; }
	go vet -tags e2e ./...
	$(STATICCHECK) -tags e2e ./...
	cd scripts/tools/testbed && go vet ./...
	cd scripts/tools/controller-gen && go vet ./...
	cd scripts/tools/image && go vet ./...
	cd scripts/tools/docs && go vet ./...
	cd scripts/tools/registry && go vet ./...
	@# shellcheck and pyflakes are left out: neither is installed here, and a
	@# check that runs only where they happen to be would pass here and fail there.
	$(ACTIONLINT) -shellcheck= -pyflakes= .github/workflows/*.yaml
	cd scripts/tools/promrules && go vet ./...

.PHONY: test-unit
test-unit: ## Unit tests (fakes only).
	go test -count=1 ./...
	cd scripts/tools/testbed && go test -count=1 ./...
	cd scripts/tools/docs && go test -count=1 ./...
	cd scripts/tools/promrules && go test -count=1 ./...
	cd scripts/tools/seccomp && go test -count=1 ./...

.PHONY: seccomp-profile
seccomp-profile: ## Write policies/seccomp/rootless-dind.json (the unprivileged runner pods' Localhost profile) from containerd's default (on amd64).
	cd scripts/tools/seccomp && go run -mod=readonly . -o ../../../policies/seccomp/rootless-dind.json

.PHONY: test-chart
test-chart: ## helm lint --strict, helm unittest and the chart's checks.
	$(CHART)/hack/test.sh

# The bed's real node (containerd, runc and a kubelet; scripts/tools/testbed/
# README.md), for the e2e tests whose pods must run as containers. The
# other releases of make test-k8s-versions build no kubelet: they run without.
export TESTBED_REAL_NODE ?= 1
# Its runtime is containerd 2 with a newer runc, built from their modules
# (cached), which pods with hostUsers: false need; and the API server runs
# with the gate under which Pod Security 1.34 admits such pods at baseline
# (1.35 and later need none): the unprivileged flavour's e2e test runs there.
export TESTBED_NODE_RUNTIME ?= containerd2
export TESTBED_APISERVER_FEATURE_GATES ?= UserNamespacesPodSecurityStandards=true

.PHONY: testbed-up
testbed-up: ## Build the scaler and start etcd, kube-apiserver, controllers, kwok, the agent and Gitea on loopback.
	scripts/testbed up

.PHONY: testbed-down
testbed-down: ## Stop everything the test bed started.
	scripts/testbed down

.PHONY: test-e2e
test-e2e: testbed-up ## End-to-end tests against the test bed.
	@# Build every area first (running no test), so no compiler competes
	@# with the bed's Gitea once the first area's tests start.
	go test -count=1 -tags e2e -run '^$$' ./internal/e2e/... >/dev/null
	@# Two phases (internal/e2e/share.go): the Exclusive tests of every area
	@# one after the other, then every Parallel test; each phase skips the
	@# other's tests, and the summary leaves those skips out.
	@: > $(CACHE)/e2e.log; failed=0; for phase in alone shared; do \
	  echo "test-e2e: phase $$phase"; t0=$$(date +%s); rc=0; \
	  (set +e; E2E_PHASE=$$phase go test -count=1 -p $(E2E_AREAS) -tags e2e -timeout $(E2E_TIMEOUT) -v ./internal/e2e/... 2>&1 | tee -a $(CACHE)/e2e.log | \
	    grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic|\s+\S+_test.go)' | grep -vE '^--- SKIP|runs in the (alone|shared) phase'; exit $${PIPESTATUS[0]}) || rc=$$?; \
	  echo "test-e2e: phase $$phase took $$(( $$(date +%s) - t0 ))s"; [ $$rc = 0 ] || failed=$$rc; \
	done; exit $$failed

# The scale benchmark's full matrices take tens of minutes each: groups ×
# targets × jobs (internal/e2e/bench/scale_test.go) and groups × namespaces in
# CronJob and loop mode (namespaces_test.go); the e2e suite runs a smoke
# matrix of each. Take the e2e lock first:
#   flock /tmp/e2e.lock bash -c 'make bench; rc=$$?; scripts/testbed down; exit $$rc'
BENCH_TIMEOUT ?= 180m

.PHONY: bench
bench: testbed-up ## Scale benchmark on the test bed: per pass wall time, Gitea and Kubernetes requests, peak RSS, by groups, targets and namespaces.
	BENCH=full go test -count=1 -tags e2e -timeout $(BENCH_TIMEOUT) -run '^TestBenchmark(Scale|Namespaces)$$' -v ./internal/e2e/bench/ 2>&1 | tee $(CACHE)/bench.log ; \
	  exit $${PIPESTATUS[0]}

# The namespace matrix alone; BENCH_NS=5000/500,500/10 picks cases (G/N).
.PHONY: bench-namespaces
bench-namespaces: testbed-up ## Scale benchmark by namespaces only: CronJob and loop mode (BENCH_NS=G/N,... picks cases).
	BENCH=full go test -count=1 -tags e2e -timeout $(BENCH_TIMEOUT) -run '^TestBenchmarkNamespaces$$' -v ./internal/e2e/bench/ 2>&1 | tee $(CACHE)/bench-namespaces.log ; \
	  exit $${PIPESTATUS[0]}

# The scale-up latency harness (internal/e2e/bench/latency_test.go): 20 pushes
# per mode (webhook; 10 needs: chains with the webhook; loop, a pass every
# 10s; the chart's CronJob; webhook and loop with a warm pool of 3), one
# mode after the other, about 13 minutes; LATENCY_MODES picks some. Take the e2e lock first:
#   flock /tmp/e2e.lock bash -c 'make bench-latency; rc=$$?; scripts/testbed down; exit $$rc'
LATENCY_MODES ?= webhook|chain|loop|cronjob|webhook-warm|loop-warm

.PHONY: bench-latency
bench-latency: testbed-up ## Scale-up latency on the test bed with the real Gitea: push to runner Job and to in_progress, per mode.
	LATENCY=full go test -count=1 -tags e2e -timeout $(BENCH_TIMEOUT) -run '^TestScaleUpLatency$$/^($(LATENCY_MODES))$$' -v ./internal/e2e/bench/ 2>&1 | tee $(CACHE)/latency.log ; \
	  exit $${PIPESTATUS[0]}

.PHONY: test
# Each fuzz target runs briefly: long enough to catch a regression on
# malformed input, short enough for every CI run. A count, not a duration:
# when a duration runs out while the fuzzer is minimising a new input, go
# test reports "context deadline exceeded" as a failure.
FUZZTIME ?= 50000x
FUZZ_TARGETS := ./internal/selector:FuzzParse ./internal/assign:FuzzOwner ./internal/state:FuzzDecode ./internal/runnerlabels:FuzzCanRun ./internal/giteaurl:FuzzCheck

.PHONY: fuzz
fuzz: ## Run every Go fuzz target for FUZZTIME each.
	@for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; \
	  echo "fuzz $$fn ($$pkg) for $(FUZZTIME)"; \
	  go test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) "$$pkg" || exit 1; done

# make test runs its steps in order and says what each took. The bed
# starts (testbed-fresh) while the static checks and unit tests run, after
# verify-generated has rewritten what the bed applies: it waits on Gitea and
# the API server most of the time. Its output is printed whole when it
# ends. The other versions' suites run last, on their own beds once the
# default bed is down: run beside the default bed's e2e suite they saved
# their 6 minutes but starved the 1.27.3 bed's Gitea (a latency smoke test
# waited over a minute for a job listing) and doubled the alone phase. The
# first failing step ends the run, once the bed's start has ended too.
TEST_STEPS_BEFORE_BED := lint test-unit fuzz test-image test-chart
TEST_STEPS_ON_BED := test-e2e test-smoke test-demo test-other-versions

test: ## Everything CI runs.
	@step() { local t0=$$(date +%s) src=0; $(MAKE) --no-print-directory $$1 || src=$$?; \
	  echo "make test: $$1 took $$(( $$(date +%s) - t0 ))s$$( [ $$src = 0 ] || echo ", FAILED ($$src)")"; return $$src; }; \
	rc=0; step verify-generated || exit $$?; \
	( step testbed-fresh > $(CACHE)/testbed-fresh.log 2>&1 ) & bed=$$!; \
	for s in $(TEST_STEPS_BEFORE_BED); do step $$s || { rc=$$?; break; }; done; \
	brc=0; wait $$bed || brc=$$?; cat $(CACHE)/testbed-fresh.log; \
	[ $$rc = 0 ] || exit $$rc; [ $$brc = 0 ] || exit $$brc; \
	for s in $(TEST_STEPS_ON_BED); do step $$s || exit $$?; done

# make test owns its bed: it starts one from empty data, so whatever make
# demo or an interrupted earlier run left (releases, namespaces, the CRD's
# owner, Gitea orgs) cannot decide the result. The tools stay cached.
.PHONY: testbed-fresh
testbed-fresh: ## Stop the test bed, wipe its data (not the tool cache) and start it again.
	scripts/testbed up --fresh

# The README's `make demo`, checked: scripts/demo up on the running bed (no
# second testbed up, which may restart the agent) checks what it promises and
# fails when it falls short; demo down --keep-testbed then removes all it made,
# whatever the result, and the caller stops the bed. No terminal is needed.
# It first removes what an earlier make demo or an interrupted run left of
# the demo (release, namespaces, Gitea org), so it starts from its own state.
DEMO_CHECK_TIMEOUT ?= 8m

# The bed's own proof (scripts/testbed smoke), run so that it cannot rot: it broke
# unseen once the scaler refused loopback Gitea URLs not allowed by name.
.PHONY: test-smoke
test-smoke: testbed-up ## scripts/testbed smoke: one scaler pass serves a queued Gitea job on the bed.
	scripts/testbed smoke

.PHONY: test-demo
test-demo: testbed-up ## The demo on the test bed: fails unless it shows what the README promises.
	scripts/demo down --keep-testbed </dev/null
	t0=$$(date +%s); rc=0; DEMO_TESTBED_UP=0 DEMO_TIMEOUT=240 timeout --kill-after=10s $(DEMO_CHECK_TIMEOUT) scripts/demo up </dev/null || rc=$$?; \
	  scripts/demo down --keep-testbed </dev/null; echo "test-demo: up and down took $$(( $$(date +%s) - t0 ))s"; exit $$rc

# The chart's lowest and highest supported Kubernetes minors (Chart.yaml's
# kubeVersion; the chart README's "Supported versions"), each on a bed of
# its own data (.testbed/k8s-<version>) and ports (K8S_VERSIONS_PORTS), one
# after the other, beside the Gitea versions' bed (test-other-versions). The
# focused suite: the quick start as written (helm installs the chart and its
# CRD, a CronJob pass creates a runner Job, the real runner takes the job),
# the looping Deployment and its watches, the CRD's schema and CEL
# refusals, the policies' refusals and the Pod Security pre-check against
# the API server's. Each release is built once into
# .cache/kubernetes/<version>; a warm cache builds nothing.
K8S_FLOOR_VERSION := v1.30.14
K8S_CEILING_VERSION := v1.37.2
K8S_VERSIONS ?= $(K8S_FLOOR_VERSION) $(K8S_CEILING_VERSION)
K8S_VERSIONS_RUN := ^(TestQuickStartAsWritten|TestLoopingListenerServesHealthz|TestAdmissionRunnerGroups|TestAdmissionRunnerGroupStatus|TestPolicyRunnerGroupGuardrails|TestPolicyRestrictedPods|TestPodSecurityPreCheckAgreesWithTheAPIServer|TestRunnerRecipesAgainstPodSecurity)$$

# Loopback ports of their own, so these beds run beside the default one and
# beside each other.
K8S_VERSIONS_PORTS := TESTBED_ETCD_PORT=24190 TESTBED_ETCD_PEER_PORT=24191 TESTBED_APISERVER_PORT=26843 TESTBED_KCM_PORT=26657 \
  TESTBED_SCHEDULER_PORT=26659 TESTBED_KWOK_PORT=26480 TESTBED_GITEA_PORT=24200 TESTBED_REGISTRY_PORT=25400
GITEA_VERSIONS_PORTS := TESTBED_ETCD_PORT=24290 TESTBED_ETCD_PEER_PORT=24291 TESTBED_APISERVER_PORT=26943 TESTBED_KCM_PORT=26757 \
  TESTBED_SCHEDULER_PORT=26759 TESTBED_KWOK_PORT=26580 TESTBED_GITEA_PORT=24300 TESTBED_REGISTRY_PORT=25500

# The two focused suites at once, after the default bed went down (its real
# node and its load): each spends most of its time waiting on its own bed,
# so together they take about as long as the longer one. Each one's output
# is printed whole when it ends.
.PHONY: test-other-versions
test-other-versions: ## test-k8s-versions and test-gitea-versions at once, on beds of their own.
	scripts/testbed down
	$(MAKE) -j2 -Otarget test-k8s-versions test-gitea-versions

.PHONY: test-k8s-versions
test-k8s-versions: ## The focused e2e suite on the chart's lowest and highest supported Kubernetes minors (K8S_VERSIONS).
	@for v in $(K8S_VERSIONS); do \
	  export $(K8S_VERSIONS_PORTS) TESTBED_K8S_VERSION=$$v TESTBED_REAL_NODE=0 TESTBED_APISERVER_FEATURE_GATES= TESTBED_DIR=$(CURDIR)/.testbed/k8s-$$v; t0=$$(date +%s); rc=0; \
	  echo "test-k8s-versions: Kubernetes $$v"; \
	  if scripts/testbed up --fresh && eval "$$(scripts/testbed env)"; then \
	    (set +e; go test -count=1 -p $(E2E_AREAS) -tags e2e -timeout 10m -run '$(K8S_VERSIONS_RUN)' -v ./internal/e2e/... 2>&1 | tee $(CACHE)/e2e-k8s-$$v.log | \
	      grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic|\s+\S+_test.go)'; exit $${PIPESTATUS[0]}) || rc=$$?; \
	  else rc=1; fi; \
	  scripts/testbed down; echo "test-k8s-versions: Kubernetes $$v took $$(( $$(date +%s) - t0 ))s"; \
	  [ $$rc = 0 ] || { echo "test-k8s-versions: the focused suite failed on Kubernetes $$v (log: $(CACHE)/e2e-k8s-$$v.log)"; exit $$rc; }; \
	done

# Today's stack beside the default one (Gitea 1.26.0 and gitea-runner 1.0.8):
# Gitea 1.27.3, built from a writable copy of its module
# (scripts/tools/gitea/build-copy.sh), with gitea-runner 3.1.0, on a bed of
# its own data (.testbed/gitea-<version>) and ports, beside the Kubernetes
# minors' (test-other-versions). The focused suite: the quick start as written with the real runner, the
# lifecycle paths that read Gitea's runner status (idle reaping, orphan
# registrations, a disabled runner, a cancelled job's runner cleaning up),
# the webhook (the latency smoke's webhook mode) and `why`. Each version is
# built once into .cache/gitea/<version> and .cache/gitea-runner/<version>.
GITEA_STACK_VERSION := v1.27.3
GITEA_STACK_RUNNER_VERSION := v3.1.0
GITEA_VERSIONS_RUN := ^(TestQuickStartAsWritten|TestFaultGiteaJobWhoseRepositoryIsGoneStrandsNoOtherJob|TestARunnerThatEndsWithoutTakingAJobIsReported|TestLifecycleIdleRunnerIsReaped|TestLifecycleOrphanRegistrationIsRemoved|TestADisabledRealRunnerTakesNoJobAndIsNotSupply|TestACancelledJobsRunnerFinishesItsCleanupBeforeItsJobGoes|TestScaleUpLatency|TestWhyExplainsServedBlockedUnmatchedAndWaitingJobs)$$
GITEA_VERSIONS_SKIP := ^TestScaleUpLatency$$/^(chain|loop|cronjob)$$

.PHONY: test-gitea-versions
test-gitea-versions: ## The focused e2e suite on Gitea $(GITEA_STACK_VERSION) with gitea-runner $(GITEA_STACK_RUNNER_VERSION).
	@export $(GITEA_VERSIONS_PORTS) TESTBED_GITEA_VERSION=$(GITEA_STACK_VERSION) TESTBED_RUNNER_VERSION=$(GITEA_STACK_RUNNER_VERSION) TESTBED_REAL_NODE=0 TESTBED_APISERVER_FEATURE_GATES= \
	  TESTBED_DIR=$(CURDIR)/.testbed/gitea-$(GITEA_STACK_VERSION); t0=$$(date +%s); rc=0; \
	echo "test-gitea-versions: Gitea $(GITEA_STACK_VERSION), gitea-runner $(GITEA_STACK_RUNNER_VERSION)"; \
	if scripts/testbed up --fresh && eval "$$(scripts/testbed env)"; then \
	  (set +e; go test -count=1 -p $(E2E_AREAS) -tags e2e -timeout 15m -run '$(GITEA_VERSIONS_RUN)' -skip '$(GITEA_VERSIONS_SKIP)' -v ./internal/e2e/... 2>&1 | \
	    tee $(CACHE)/e2e-gitea-$(GITEA_STACK_VERSION).log | \
	    grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic|\s+\S+_test.go)'; exit $${PIPESTATUS[0]}) || rc=$$?; \
	else rc=1; fi; \
	scripts/testbed down; echo "test-gitea-versions: Gitea $(GITEA_STACK_VERSION) took $$(( $$(date +%s) - t0 ))s"; \
	[ $$rc = 0 ] || { echo "test-gitea-versions: the focused suite failed on Gitea $(GITEA_STACK_VERSION) (log: $(CACHE)/e2e-gitea-$(GITEA_STACK_VERSION).log)"; exit $$rc; }

.PHONY: demo
demo: ## One command: test bed, Gitea org/repo/workflow, chart install, runners at work.
	scripts/demo up

.PHONY: demo-down
demo-down:
	scripts/demo down

.PHONY: clean
clean: ## Remove build outputs (keeps the tool cache).
	rm -rf bin

.PHONY: help
help:
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | column -t -s $$'\t'
