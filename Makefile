.DEFAULT_GOAL := help
GO ?= go

help: ## list the targets
	@grep -E '^[a-z/-]+:.*##' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

build: ## build ./jobs
	$(GO) build -o jobs ./cmd/jobs

demo: ## run the system end to end on an embedded Redis and show jobs flowing
	$(GO) run ./cmd/jobs dev --demo

STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

lint: ## gofmt, go vet, go mod tidy (no diff) and staticcheck (fetched from the module proxy)
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt -w needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) mod tidy -diff
	$(GO) run $(STATICCHECK) ./...

test: lint ## lint, then every test with the race detector (installs redis-server when missing and root)
	@./.ci/ensure-redis
	$(GO) test -race -count=1 -timeout 15m ./...
	@echo "--- again on a local 3-master Redis Cluster (JOBS_TEST_CLUSTER=1): lifecycle, worker, cron, locks, scripts"
	JOBS_TEST_CLUSTER=1 $(GO) test -race -count=1 -timeout 10m -run '^Test' ./queue ./worker ./cron ./lock ./scripts

test/short: ## run the tests that need no Redis
	$(GO) test -short ./...

FUZZTIME ?= 30s
fuzz: ## run every fuzz target for FUZZTIME each (go test runs their seed corpora in `test`)
	@for t in cron:FuzzParseEntry queue:FuzzDecodeJob queue:FuzzOptions cmd/jobs:FuzzParseFileJob \
		cmd/jobs:FuzzRedact cmd/jobs:FuzzOpenRedis internal/shellwords:FuzzSplit dash:FuzzPagesEscape; do \
		echo "--- $${t#*:}"; $(GO) test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) ./$${t%%:*} || exit 1; done

bench: ## Go benchmarks
	$(GO) test -run '^$$' -bench . -benchtime 2s ./...

.PHONY: help build demo lint test test/short fuzz bench
