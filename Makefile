# The two commands of the README, and a few more. Each installs what it needs first.
#   make run    build and start delayq (the embedded store in ./delayq-data)
#   make test   build and run the whole test suite
BUILD ?= build
SAN_BUILD ?= build-sanitize
TSAN_BUILD ?= build-tsan
JOBS ?= $(shell nproc)
# The build a user makes (Release), with warnings as errors: CI builds and tests exactly that.
# Every build here compiles src/ in batches (DELAYQ_UNITY, cmake/DelayqLibrary.cmake): from clean,
# which is how users and CI build, that takes a fraction of the time.
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release -DDELAYQ_WERROR=ON -DDELAYQ_UNITY=ON

.PHONY: all deps build run test deb check-deb test-sanitize test-sanitize-redis test-sanitize-all test-tsan test-tsan-all check-history check-mutants fuzz fuzz-build format format-check tidy bench bench-redis bench-kafka bench-peers bench-growth bench-pg-churn bench-pg-sql bench-pg-reserve bench-stream bench-capacity bench-ordered bench-shards clean

all: build

deps:
	@./scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	@./$(BUILD)/delayq serve --listen $${DELAYQ_LISTEN:-127.0.0.1:7070} --data $${DELAYQ_DATA:-./delayq-data}

# promtool (for the alert-rule tests) comes out of Debian's prometheus package: scripts/promtool.sh;
# the OpenAPI validators from npm: scripts/openapi-tools.sh. Both are fetched once, into a cache.
test: build
	@./scripts/root-dir-mode.sh
	@./scripts/promtool.sh --version >/dev/null
	@./scripts/openapi-tools.sh >/dev/null
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 600

# The same suite under AddressSanitizer + UndefinedBehaviorSanitizer, and under ThreadSanitizer
# (CI runs both). Three stores and their variants make the whole suite too long to run three times
# in CI's hour on 2 cores, so each sanitizer runs the store-independent part (the server, the CLI,
# the clients, the wire and HTTP layers, the history checker's verifier: all on the embedded store)
# and the two split what is left by what each finds:
# - ThreadSanitizer runs the PostgreSQL store (its listener, scheduler and pool threads are
#   delayq's own; not the SQL API's tests, whose code runs inside PostgreSQL) and the conformance
#   suite over HTTP (the server's threads, the client's pool);
# - ASan + UBSan runs the embedded store's conformance with a tiny due window (16 jobs held in
#   memory, refilled 4 at a time: every path through the window's edge); ThreadSanitizer runs it
#   with `none` (the background flush thread). `sync`'s group commit runs under both in every
#   server test (the server's default).
# - The dashboard's tests (a browser driving pages the server serves as files) run in neither.
# The Redis store runs its five variants in the plain build (`make test`);
# RedisDeploy.* and the Redis conformance suite ran under both sanitizers in the rounds that wrote
# them, and run there again with `make test-sanitize-redis`; `make test-sanitize-all` and
# `make test-tsan-all` run each sanitizer on everything it can build.
#
# Left out of both, beside that: the history checker's short runs (minutes more under ASan, and
# they measure lateness), the test that memory goes back to the system after large requests (the
# sanitizers' allocators hold freed memory in quarantine on purpose), the installed package's
# test (it builds examples/ against the installed, here instrumented, libraries without the
# sanitizers), the checks of documents that run no delayq code (the OpenAPI document and the
# answers recorded against it: that check needs every HTTP conformance run, HTTPS too, as its
# setup, so ctest would bring those back; the alert rules, cited paths, function lengths), the benchmark harness's smoke test, and the conformance
# suite over HTTPS (the TLS transport is driven under both by Security.Tls*, Security.MutualTls*
# and the server name test). The Python and Node clients' tests only add another HTTP client to a
# server the C++ suites already drive (~90 s under ASan).
# Built with line tables only (-g1): a fifth less compile time than -g, and reports keep their lines.
SAN_COMMON_EXCLUDE = _NOT_BUILT|Modes/Check|MemoryGoesBackAfterLargeRequests|InstalledPackage|OpenApiDocument|OpenApiAnswers|PrometheusAlertRules|CitedPathsExist|FunctionLengths|PeersHarness|PythonClient|NodeClient|GoClient|JavaClient|Redis/|QueueConformance\..*/https
SAN_TARGETS ?= delayq_cli core_test schedule_test runner_test engine_test make_engine_fixture upgrade_test crash_child crash_test \
  http_test http_server_test wire_test client_test integration_test cli_test kafka_test delayq_fuse fuse_test \
  delayq_check check_test security_test push_stream_test
SAN_EXCLUDE ?= $(SAN_COMMON_EXCLUDE)|Dashboard(Test|Tls|Auth|Phone)\.|Postgres/|PostgresStore\.|SqlApi\.|PostgresFixture|Engine/QueueConformance\..*/(none|sync)|HttpClient/QueueConformance\..*/server
SAN_CONFIGURE = cmake -S . -B $(SAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DDELAYQ_SANITIZE=ON \
  -DDELAYQ_WERROR=ON -DDELAYQ_BUILD_BENCH=OFF -DDELAYQ_UNITY=ON >/dev/null
SAN_ENV = ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1
test-sanitize: deps
	@$(SAN_CONFIGURE)
	@cmake --build $(SAN_BUILD) -j $(JOBS) --target $(SAN_TARGETS)
	@cd $(SAN_BUILD) && $(SAN_ENV) ctest --output-on-failure -j $(JOBS) --timeout 900 -E "$(SAN_EXCLUDE)"

# Each sanitizer on every variant CI splits between them (the Redis store: test-sanitize-redis).
test-sanitize-all:
	@$(MAKE) --no-print-directory test-sanitize SAN_TARGETS="$(SAN_TARGETS) postgres_test dashboard_test" SAN_EXCLUDE="$(SAN_COMMON_EXCLUDE)"
test-tsan-all:
	@$(MAKE) --no-print-directory test-tsan TSAN_EXCLUDE="$(SAN_COMMON_EXCLUDE)"

# The Redis store's tests under ASan + UBSan (one Redis, TLS with a password, Sentinel, Lua).
test-sanitize-redis: deps
	@$(SAN_CONFIGURE)
	@cmake --build $(SAN_BUILD) -j $(JOBS) --target delayq_cli redis_test
	@cd $(SAN_BUILD) && $(SAN_ENV) ctest --output-on-failure -j $(JOBS) --timeout 900 -R "Redis|Lua|DeliveryFirst" -E "AllOn/cluster"

# ThreadSanitizer: the binaries whose threads delayq runs. RocksDB, librdkafka and hiredis come
# from Debian without TSan instrumentation; suppressions for what happens inside them are in
# tests/tsan.supp. Left to the other builds, beside what ASan leaves: the dashboard (a browser),
# the kill -9 and FUSE tests, and the Kafka forwarder (librdkafka's threads crash TSan's runtime as
# soon as the mock cluster starts). Built at -O1 -g1 (line tables only): TSan's documented
# optimisation level, and half the compile time of -O2 -g (46.8 -> 23.1 s for
# tests/http/api_test.cc).
TSAN_TARGETS ?= delayq_cli core_test engine_test http_test http_server_test client_test integration_test cli_test postgres_test \
  push_stream_test
TSAN_EXCLUDE ?= $(SAN_COMMON_EXCLUDE)|SqlApi\.|Engine/QueueConformance\..*/(tiny_window|sync)
test-tsan: deps
	@cmake -S . -B $(TSAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" \
	  -DDELAYQ_TSAN=ON -DDELAYQ_WERROR=ON -DDELAYQ_BUILD_BENCH=OFF -DDELAYQ_UNITY=ON >/dev/null
	@cmake --build $(TSAN_BUILD) -j $(JOBS) --target $(TSAN_TARGETS)
	@cd $(TSAN_BUILD) && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$(CURDIR)/tests/tsan.supp" \
	  ctest --output-on-failure -j $(JOBS) --timeout 900 -E "$(TSAN_EXCLUDE)"

# The history checker (docs/reliability.md) in every mode for CHECK_DURATION each; prints one
# verdict per mode and appends them to $(BUILD)/check-history.jsonl. `make test` runs short ones.
CHECK_DURATION ?= 60s
check-history: build
	@./scripts/check-history.sh $(BUILD) $(CHECK_DURATION)

# The checker against seeded defects (src/core/mutant.h): builds build-mutants/ and runs
# delayq-check once per mutant at its default length; fails unless each gets a FAIL verdict.
# The Debian package (SPEC §11.5; cmake/Package.cmake): build-deb/delayq_<version>-<revision>_<arch>.deb.
# DEB_REVISION=N makes another revision of the same version (the upgrade test builds two).
DEB_REVISION ?= 1
deb: deps
	@DELAYQ_EXTRA_PACKAGES="dpkg-dev fakeroot help2man" ./scripts/install-deps.sh
	@cmake -S . -B build-deb -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr -DDELAYQ_DEB=ON \
	  "-DCMAKE_CXX_FLAGS=-D_FORTIFY_SOURCE=2" "-DCMAKE_EXE_LINKER_FLAGS=-Wl,-z,relro,-z,now" \
	  -DDELAYQ_DEB_REVISION=$(DEB_REVISION) -DDELAYQ_BUILD_TESTS=OFF -DDELAYQ_BUILD_BENCH=OFF -DDELAYQ_UNITY=ON \
	  $(if $(shell command -v ccache),-DCMAKE_CXX_COMPILER_LAUNCHER=ccache) >/dev/null
	@cmake --build build-deb -j $(JOBS)
	@cd build-deb && cpack -G DEB >/dev/null && ls -1 $(CURDIR)/build-deb/delayq_*-$(DEB_REVISION)_*.deb

# The package installed into a fresh Debian 12 root: serves with its config, delivers, upgrades to
# another revision with the jobs still there, removes and purges (tests/packaging/deb_test.sh);
# lintian's findings, each fixed or explained there.
check-deb:
	@DELAYQ_EXTRA_PACKAGES="debootstrap lintian" ./scripts/install-deps.sh
	@./tests/packaging/deb_test.sh

check-mutants: build
	@./scripts/check-mutants.sh build-mutants

# Fuzz the request/JSON handling, raw connections to the whole server, Redis reply decoding,
# the Kafka headers and the duration parser for FUZZ_SECONDS each (CI: 10). An input that crashes
# or exhausts memory is kept as build-fuzz/fuzz-TARGET-crash-* (or -oom-*), never in the tree.
FUZZ_TARGETS = request connection redis_reply kafka_headers duration
FUZZ_SECONDS ?= 60
# Built at -O1 -g1, as the TSan build and for the same reason (compile time in CI).
fuzz-build: deps
	@DELAYQ_EXTRA_PACKAGES="clang-14 libclang-rt-14-dev" ./scripts/install-deps.sh
	@CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" -DDELAYQ_FUZZ=ON -DDELAYQ_BUILD_TESTS=OFF -DDELAYQ_BUILD_BENCH=OFF -DDELAYQ_UNITY=ON >/dev/null
	@cmake --build build-fuzz -j $(JOBS) --target $(addprefix fuzz_,$(FUZZ_TARGETS))
fuzz: fuzz-build
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p build-fuzz/corpus-$$t && cp -n tests/fuzz/corpus/$$t/* build-fuzz/corpus-$$t/ 2>/dev/null; \
	  echo "fuzzing $$t for $(FUZZ_SECONDS)s"; \
	  ./build-fuzz/tests/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -print_final_stats=1 \
	    -artifact_prefix=build-fuzz/fuzz-$$t- build-fuzz/corpus-$$t 2>build-fuzz/fuzz-$$t.log || { tail -40 build-fuzz/fuzz-$$t.log; exit 1; }; \
	  grep -E "stat::number_of_executed_units|Done" build-fuzz/fuzz-$$t.log | tail -1; \
	done

# The code's format (.clang-format, Debian 12's clang-format 14): `make format` rewrites the
# tracked C++ files, `make format-check` (CI) fails naming each file that differs.
FORMAT_FILES = $(shell git ls-files '*.cc' '*.h')
format: deps
	@DELAYQ_EXTRA_PACKAGES="clang-format" ./scripts/install-deps.sh
	@clang-format -i $(FORMAT_FILES)
format-check: deps
	@DELAYQ_EXTRA_PACKAGES="clang-format" ./scripts/install-deps.sh
	@clang-format --dry-run -Werror $(FORMAT_FILES) 2>&1 | grep -E "^[^ ].*error:" | cut -d: -f1 | sort -u | \
	  sed 's/^/not formatted (make format): /' | { ! grep .; } && echo "format: $(words $(FORMAT_FILES)) files as .clang-format says"

# clang-tidy with the small set of bug-finding checks in .clang-tidy, on every source file of
# src/ (compile commands from build-tidy/, configured without DELAYQ_UNITY: a batched build's
# compile commands name its batches, not src/'s files); a finding fails it, and so does a run that
# checked fewer files than src/ has (a review caught one that checked 2 and passed).
TIDY_BUILD ?= build-tidy
tidy: deps
	@DELAYQ_EXTRA_PACKAGES="clang-tidy" ./scripts/install-deps.sh
	@cmake -S . -B $(TIDY_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DDELAYQ_UNITY=OFF -DDELAYQ_BUILD_TESTS=OFF -DDELAYQ_BUILD_BENCH=OFF \
	  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >/dev/null
	@run-clang-tidy -quiet -p $(TIDY_BUILD) -j $(JOBS) -extra-arg=-Wno-unknown-warning-option "$(CURDIR)/src/.*\.cc$$" > $(TIDY_BUILD)/tidy.log 2>&1 || \
	  { grep -E "(warning|error):" $(TIDY_BUILD)/tidy.log | sort -u | head -50; exit 1; }
	@checked=$$(grep -c '^clang-tidy' $(TIDY_BUILD)/tidy.log); want=$$(git ls-files 'src/*.cc' | wc -l); \
	  [ "$$checked" -ge "$$want" ] || { echo "clang-tidy checked $$checked files of src/'s $$want" >&2; exit 1; }; \
	  echo "clang-tidy: no finding in src/ ($$checked files)"

bench: build
	@./scripts/bench-engine.sh
	@./scripts/bench-server.sh

# delayq on Redis side by side with BullMQ (needs the npm registry once, for BullMQ).
bench-redis: build
	@./scripts/bench-redis.sh

bench-kafka: build
	@./scripts/bench-kafka.sh

# delayq side by side with BullMQ, beanstalkd and the Redis sorted-set queues (bench/README.md);
# writes bench/results/peers.{md,json} and the plots. Needs the npm registry once.
bench-peers: build
	@./scripts/bench-peers.sh

# Enqueue rate, lateness and memory with 0, 1 M and 10 M jobs already scheduled (embedded, Redis)
# and --redis-shards 1, 2, 4 on a local Redis Cluster; writes bench/results/growth.{md,json,png}.
bench-growth: build
	@./scripts/bench-growth.sh

# Push streams against long-poll consumers, side by side on one server (issue 30): server CPU
# per job and lateness (scripts/bench-stream.sh).
bench-stream: build
	@./scripts/bench-stream.sh $(BUILD)

# The capacity model: CPU per job of delayq and of Redis, each pinned to a core, turned into jobs/s
# per core and a projection over Redis Cluster masters (scripts/bench-capacity.sh).
bench-capacity: build
	@./scripts/bench-capacity.sh $(BUILD)

# Priorities and fair groups against the plain path on both stores: reserve + ack jobs/s, and
# Redis's commands per job (scripts/bench-ordered.sh; bench/results/ordered.md).
bench-ordered: build
	@./scripts/bench-ordered.sh $(BUILD)

# Batch enqueue on Redis from one server, a queue over 4 shards on one Redis and on a 2-master
# cluster (scripts/bench-shards.sh; bench/results/shards.md).
bench-shards: build
	@./scripts/bench-shards.sh $(BUILD)

# delayq's tables on PostgreSQL through 10 M churned jobs with 100 k live (issue 29); writes
# bench/results/postgres/churn.md.
bench-pg-churn: build
	@./scripts/bench-pg-churn.sh $(BUILD)

bench-pg-sql: build
	@./scripts/bench-pg-sql.sh $(BUILD)

# The database's time per job in delayq._reserve and _ack (BASELINE=<rev>: that schema side by
# side); writes bench/results/postgres/reserve-ack.md.
bench-pg-reserve: build
	@./scripts/bench-pg-reserve.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(SAN_BUILD) $(TSAN_BUILD) build-fuzz
