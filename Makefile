# Thin wrapper over CMake; see README.md.
JOBS ?= 2
BUILD ?= build
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo
# Developer and CI builds treat warnings as errors; a plain cmake build does not.
DEV_FLAGS = -DFS_WERROR=ON

# The packager's build, apart from the developer's (no tests: only the build dependencies).
PKG_BUILD ?= build-package

.PHONY: docs all deps deps-build build run test test-release test-asan test-tsan test-fuzz bench eval fuzz format clean package package-check-root package-check-systemd image-check

all: build

deps:
	@scripts/install-deps.sh

# What building the binaries and the packages needs, without the test tools.
deps-build:
	@scripts/install-deps.sh --build-only

build: deps
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS) $(DEV_FLAGS) >/dev/null
	cmake --build $(BUILD) -j$(JOBS)

run: build
	scripts/run-demo.sh $(BUILD)

# Unit and integration tests, again under ASan+UBSan, then under TSan (the tests labelled
# "tsan-ok"; tests/CMakeLists.txt says which and why), and the fuzzers replaying their
# corpora.
test: deps
	$(MAKE) test-release test-asan test-tsan test-fuzz
	@echo "make test: all test suites passed"

# The optimized build a packager makes (gcc -O3 warns about more than -O2 does), and the
# package checks (label "packaging", here only: a sanitizer changes nothing they check).
test-release:
	cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release $(DEV_FLAGS) >/dev/null
	cmake --build build-release -j$(JOBS)
	cd build-release && ctest -L 'unit|integration|packaging' --output-on-failure -j$(JOBS)

test-asan:
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DSANITIZE=address $(DEV_FLAGS) >/dev/null
	cmake --build build-asan -j$(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest -L 'unit|integration' --output-on-failure -j$(JOBS)

test-tsan:
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DSANITIZE=thread $(DEV_FLAGS) >/dev/null
	cmake --build build-tsan -j$(JOBS)
	cd build-tsan && TSAN_OPTIONS=halt_on_error=1 ctest -L tsan-ok --output-on-failure -j$(JOBS)

test-fuzz:
	CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFUZZ=ON $(DEV_FLAGS) >/dev/null
	cmake --build build-fuzz -j$(JOBS)
	cd build-fuzz && ctest -L fuzz --output-on-failure

bench: build
	scripts/run-benches.sh $(BUILD)

# The diagnosis scored on randomized fabrics in virtual time (EVAL lines and a table per
# scenario family; EVAL_SEEDS per family, EVAL_SEED_BASE picks another set): the
# two-switch families of eval_diagnosis, then the leaf-spine pods of eval_fabric (PFC
# spread, ECMP bundles, changing load, resets, strays, backups, two jobs, 2,304 and
# 10,368 series), scored per stall window.
EVAL_SEEDS ?= 50
EVAL_SEED_BASE ?= 7000
# Then the history_across_shards family end to end (real binary, real Prometheus):
# EVAL_HISTORY_RUNS runs from EVAL_HISTORY_SEED_BASE.
EVAL_HISTORY_RUNS ?= 8
EVAL_HISTORY_SEED_BASE ?= 9100
# Then the pod_history family end to end (real binary, real Prometheus): a 2,304-series
# leaf-spine pod of world.c polled every 10 s, as Prometheus stores it scraped every 15 s
# and as remote_write sends it, scored per stall window: EVAL_POD_HISTORY_RUNS runs from
# EVAL_POD_HISTORY_SEED_BASE, 30-90 s each (both stampings).
EVAL_POD_HISTORY_RUNS ?= 8
EVAL_POD_HISTORY_SEED_BASE ?= 9500
# Then the drivers_end_to_end family (real binary, drivers, simulators and Prometheus;
# needs root for the ONYX CLI simulator's sshd): EVAL_DRIVERS_RUNS runs from
# EVAL_DRIVERS_SEED_BASE, about two minutes each.
EVAL_DRIVERS_RUNS ?= 5
EVAL_DRIVERS_SEED_BASE ?= 9300
eval: build
	$(BUILD)/eval/eval_diagnosis --seeds $(EVAL_SEEDS) --seed-base $(EVAL_SEED_BASE)
	$(BUILD)/eval/eval_fabric --seeds $(EVAL_SEEDS) --seed-base $(EVAL_SEED_BASE)
	FS_BUILD_DIR="$$PWD/$(BUILD)" bash tests/eval/eval_history.sh $(EVAL_HISTORY_RUNS) $(EVAL_HISTORY_SEED_BASE)
	FS_BUILD_DIR="$$PWD/$(BUILD)" bash tests/eval/eval_pod_history.sh $(EVAL_POD_HISTORY_RUNS) $(EVAL_POD_HISTORY_SEED_BASE)
	FS_BUILD_DIR="$$PWD/$(BUILD)" bash tests/eval/eval_drivers.sh $(EVAL_DRIVERS_RUNS) $(EVAL_DRIVERS_SEED_BASE)

# The Debian packages (CPack components): build-package/fabricscope_<version>_<arch>.deb
# (the collector) and build-package/fabricscope-host-agent_<version>_<arch>.deb (the
# GPU-host agent). Only the build dependencies are installed, and the tests not built.
package: deps-build
	cmake -S . -B $(PKG_BUILD) $(CMAKE_FLAGS) $(DEV_FLAGS) -DFS_TESTS=OFF >/dev/null
	cmake --build $(PKG_BUILD) -j$(JOBS)
	cd $(PKG_BUILD) && cpack -G DEB

# Both packages installed into a fresh debootstrap root and their units' ExecStartPre run
# there (root, a Debian mirror, a few minutes; not part of make test).
package-check-root: package
	bash tests/ops/deb-clean-root.sh $(PKG_BUILD)

# Both packages installed into a fresh debootstrap root booted with systemd-nspawn -b
# (systemd as its PID 1): units active after boot, reload, stop times, security, remove
# and purge (root, a Debian mirror, systemd-container and snmpd; not part of make test).
package-check-systemd: package
	bash tests/ops/deb-systemd-boot.sh $(PKG_BUILD)

# The container image built from a fresh clone of HEAD and run (token mounted, token
# generated), and the compose demo's simulator and collector run with docker-compose
# (a Docker engine and base images; tests/ops/image-base.sh imports those without a
# registry; several minutes; not part of make test).
image-check:
	bash tests/ops/image-check.sh

# Longer fuzzing: FUZZ_SECONDS per target.
FUZZ_SECONDS ?= 300
fuzz: deps
	CC=clang cmake -S . -B build-fuzz -DFUZZ=ON >/dev/null
	cmake --build build-fuzz -j$(JOBS)
	for f in build-fuzz/tests/fuzz_*; do n=$$(basename $$f); \
	  mkdir -p build-fuzz/tests/fuzz-work/$$n; \
	  $$f -max_total_time=$(FUZZ_SECONDS) build-fuzz/tests/fuzz-work/$$n tests/fuzz/corpus/$$n || exit 1; done

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf build build-release build-asan build-tsan build-fuzz $(PKG_BUILD)

# Regenerates the README's metric reference from schemas/metrics.json.
docs: build
	cmake --build $(BUILD) --target docs
