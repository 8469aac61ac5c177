# The two commands of the README, and a few more. Each installs what it needs first.
#   make run    build and start delayq (the embedded store in ./delayq-data)
#   make test   build and run the whole test suite
BUILD ?= build
SAN_BUILD ?= build-sanitize
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo

.PHONY: all deps build run test test-sanitize bench clean

all: build

deps:
	@./scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	@./$(BUILD)/delayq serve --listen $${DELAYQ_LISTEN:-127.0.0.1:7070} --data $${DELAYQ_DATA:-./delayq-data}

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 600

# The same suite under AddressSanitizer + UndefinedBehaviorSanitizer (CI runs both).
test-sanitize: deps
	@cmake -S . -B $(SAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DDELAYQ_SANITIZE=ON -DDELAYQ_BUILD_BENCH=OFF >/dev/null
	@cmake --build $(SAN_BUILD) -j $(JOBS)
	@cd $(SAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j $(JOBS) --timeout 900

bench: build
	@./scripts/bench-engine.sh

clean:
	rm -rf $(BUILD) $(SAN_BUILD)
