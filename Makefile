.DEFAULT_GOAL := help
GO ?= go

help: ## list the targets
	@grep -E '^[a-z/-]+:.*##' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

build: ## build ./jobs
	$(GO) build -o jobs ./cmd/jobs

demo: ## run the system end to end on an embedded Redis and show jobs flowing
	$(GO) run ./cmd/jobs dev --demo

STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

lint: ## gofmt, go vet, go mod tidy (no diff), queue's dependencies and staticcheck (fetched from the module proxy)
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt -w needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) mod tidy -diff
	@deps=$$($(GO) list -deps ./queue | grep -E 'prometheus|opentelemetry'); \
		if [ -n "$$deps" ]; then echo "package queue must link neither Prometheus nor OpenTelemetry; it imports:"; echo "$$deps"; exit 1; fi
	$(GO) run $(STATICCHECK) ./...

test: lint ## lint, then every test with the race detector (installs redis-server and chromium when missing and root)
	@./.ci/ensure-redis
	@./.ci/ensure-chromium
	$(GO) test -race -count=1 -timeout 15m ./...
	@echo "--- again on a local 3-master Redis Cluster (JOBS_TEST_CLUSTER=1): lifecycle, worker, cron, locks, scripts"
	JOBS_TEST_CLUSTER=1 $(GO) test -race -count=1 -timeout 10m -run '^Test' ./queue ./worker ./cron ./lock ./scripts
	@echo "--- bench/peers/rttproxy (a module of its own, so ./... above skips it): the delay line of bench/compare-peers RTT_MS"
	cd bench/peers/rttproxy && $(GO) vet ./... && $(GO) test -race -count=1 -timeout 5m ./...

test/short: ## run the tests that need no Redis
	$(GO) test -short ./...

FUZZTIME ?= 30s
fuzz: ## run every fuzz target for FUZZTIME each (go test runs their seed corpora in `test`)
	@for t in cron:FuzzParseEntry queue:FuzzDecodeJob queue:FuzzOptions cmd/jobs:FuzzParseFileJob \
		cmd/jobs:FuzzRedact cmd/jobs:FuzzOpenRedis internal/shellwords:FuzzSplit dash:FuzzPagesEscape; do \
		echo "--- $${t#*:}"; $(GO) test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) ./$${t%%:*} || exit 1; done

bench: ## Go benchmarks
	$(GO) test -run '^$$' -bench . -benchtime 2s ./...

UPLOT ?= 1.6.32
vendor: ## refresh dash/static/vendor/uplot from npm (developers only; never run by build or CI)
	@d=$$(mktemp -d) && (cd $$d && npm pack --silent uplot@$(UPLOT) >/dev/null && tar xzf uplot-$(UPLOT).tgz) && \
		cp $$d/package/dist/uPlot.iife.min.js $$d/package/dist/uPlot.min.css $$d/package/LICENSE dash/static/vendor/uplot/ && \
		rm -rf $$d && sha256sum dash/static/vendor/uplot/*

.PHONY: help build demo lint test test/short fuzz bench vendor
