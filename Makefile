# The two commands of the README: `make demo` and `make test`. Each installs what is missing
# (Debian packages, through scripts/install-deps.sh), builds, then runs.
BUILD       ?= build
ASAN_BUILD  ?= build-asan
FUZZ_BUILD  ?= build-fuzz
FUZZ_SECONDS ?= 60
TORCH2_TEST_BUILD ?= build-torch2-test
JOBS        ?= $(shell nproc)
WERROR      ?= $(if $(CI),ON,OFF)
CMAKE_FLAGS ?=
# The tests a sanitized tree runs, in the main tree too (`make test` runs them sanitized only).
SANITIZED_TESTS ?= ON
PYTHON      ?= /usr/bin/python3
# PyTorch 2.x and Accelerate from PyPI, in a virtual environment outside the repository
# (scripts/install-python-peers.sh): the modern peer the tests and benches compare against.
TORCH2_PYTHON ?= $(shell bash scripts/install-python-peers.sh --python)
# The machine `make wheel` builds for: this one's, or aarch64 cross-built on x86-64 (ARCH=aarch64
# or arm64, in CROSS_BUILD with cmake/toolchain-aarch64.cmake and the packages of
# scripts/install-cross-aarch64.sh).
HOST_ARCH   := $(shell uname -m)
ARCH        ?= $(HOST_ARCH)
override ARCH := $(patsubst arm64,aarch64,$(patsubst amd64,x86_64,$(ARCH)))
CROSS_BUILD ?= build-aarch64

.PHONY: all deps test-deps cross-deps configure cross-configure build wheel sdist sdist-test test test-field unit-test asan-test asan-build asan-ctest fuzz torch2-test check-format format demo install bench clean

all: build

deps:
	@bash scripts/install-deps.sh

# What only the tests use (schedulers, sshd, etcd, debuggers, PyTorch's Python peers: Debian's
# 1.13 and, from PyPI, 2.x with Accelerate; a minimal Debian 12 root for the wheel's install test).
test-deps:
	@bash scripts/install-deps.sh --test
	@bash scripts/install-python-peers.sh
	@bash scripts/install-debian12-root.sh

configure: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DACC_WERROR=$(WERROR) \
	  -DACC_TORCH2_PYTHON=$(TORCH2_PYTHON) -DACC_SANITIZED_TESTS=$(SANITIZED_TESTS) \
	  $(CMAKE_FLAGS) >/dev/null

build: configure
	cmake --build $(BUILD) -j$(JOBS)

# The wheel, dist/acc_launch-<version>-py3-none-manylinux_2_<N>_<arch>.whl (pip install it): the
# build's acc-launch, stripped, as the wheel's script, and the acc_launch Python package
# (python/acc_build_backend.py; tests/wheel/ installs it as a user would).
ifeq ($(ARCH),$(HOST_ARCH))
wheel: configure
	cmake --build $(BUILD) -j$(JOBS) --target acc-launch
	@rm -f dist/acc_launch-*_$(ARCH).whl
	@PYTHON=$(PYTHON) bash scripts/build-wheel.sh $(BUILD)/launcher/acc-launch dist
else ifeq ($(ARCH)-$(HOST_ARCH),aarch64-x86_64)
# ARCH=aarch64 on x86-64: the acc-launch target alone, cross-compiled (no tests, benches or libacc),
# packed as the x86-64 one: dist/acc_launch-<version>-py3-none-manylinux_2_<N>_aarch64.whl.
wheel: cross-configure
	cmake --build $(CROSS_BUILD) -j$(JOBS) --target acc-launch
	@rm -f dist/acc_launch-*_$(ARCH).whl
	@PYTHON=$(PYTHON) bash scripts/build-wheel.sh $(CROSS_BUILD)/launcher/acc-launch dist
else
wheel:
	@echo "make wheel: ARCH=$(ARCH): builds for this machine ($(HOST_ARCH)), or aarch64 on x86_64" >&2
	@exit 2
endif

# The cross compiler, the arm64 build packages, qemu-user (scripts/install-cross-aarch64.sh).
cross-deps:
	@bash scripts/install-cross-aarch64.sh

cross-configure: deps cross-deps
	@cmake -S . -B $(CROSS_BUILD) -G Ninja \
	  -DCMAKE_TOOLCHAIN_FILE=$(CURDIR)/cmake/toolchain-aarch64.cmake \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DACC_WERROR=$(WERROR) -DACC_BUILD_TESTS=OFF \
	  -DACC_BUILD_RUNTIME=OFF -DACC_BUILD_BENCH=OFF >/dev/null

# The aarch64 wheel cross-built here, its binary run under qemu-user (tests/wheel/aarch64_qemu.sh:
# tag, auditwheel, glibc floor, the same files as the x86-64 wheel where $(BUILD) has acc-launch,
# --version, a 2-worker job, the watchdog, config and env). Not in `make test`: the cross build
# takes minutes (9.3 on two busy cores; the test itself 9 s).
test-field:
	@$(MAKE) --no-print-directory wheel ARCH=aarch64
	@bash tests/wheel/aarch64_qemu.sh $(CROSS_BUILD)/launcher/acc-launch "$(TORCH2_PYTHON)" \
	  $(wildcard $(BUILD)/launcher/acc-launch)

# The sdist, dist/acc_launch-<version>.tar.gz: what building acc-launch needs and no more
# (python/acc_build_backend.py); `pip install` it builds acc-launch from source, in Release, with
# the build's packages (`make deps`). Builds nothing here.
sdist:
	@rm -f dist/acc_launch-*.tar.gz
	@PYTHON=$(PYTHON) bash scripts/build-sdist.sh dist

# The sdist as a user installs it (tests/wheel/sdist.sh --install): pip builds acc-launch from it
# in a fresh venv, then that acc-launch runs two workers. Not in `make test`: the build from source
# takes minutes (7.4 on two busy cores); ctest runs the rest of the script in seconds (the sdist's
# files, twine check, the line a missing build package gives).
sdist-test: deps
	@bash tests/wheel/sdist.sh --install $(BUILD) $(TORCH2_PYTHON)

# Format check and the sanitized build come first; then libacc on PyTorch 2.x's LibTorch builds
# and runs at the lowest priority beside the sanitized tests, the main build and the main tests,
# in the CPU time they leave (a quarter of two cores), and its output follows the main tree's
# ctest summary. Each test runs once: those a sanitized tree can run (the modules' unit tests, the
# launcher's integration tests: cmake/AccTargets.cmake) run sanitized only; the main tree builds
# and runs the rest.
test: SANITIZED_TESTS = OFF
test: check-format asan-build test-deps
	@mkdir -p $(TORCH2_TEST_BUILD); \
	WERROR=$(WERROR) nice -n 19 bash scripts/torch2-runtime-test.sh $(TORCH2_TEST_BUILD) \
	  $(TORCH2_PYTHON) >$(TORCH2_TEST_BUILD)/test.log 2>&1 & torch2=$$!; \
	status=0; $(MAKE) --no-print-directory SANITIZED_TESTS=OFF asan-ctest unit-test || status=$$?; \
	echo "== libacc on PyTorch 2.x's LibTorch (make torch2-test)"; \
	wait $$torch2 || status=1; cat $(TORCH2_TEST_BUILD)/test.log; exit $$status

# Each ctest run has a temporary directory of its own, removed at its end (scripts/in-test-tmpdir.sh):
# the tests leave nothing in /dev/shm or /tmp.
unit-test: build test-deps
	bash scripts/in-test-tmpdir.sh ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS) --timeout 600

asan-test: asan-build test-deps asan-ctest

asan-build: deps
	@cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DACC_SANITIZE=ON -DACC_WERROR=$(WERROR) \
	  -DACC_TORCH2_PYTHON=$(TORCH2_PYTHON) -DACC_SANITIZED_TESTS=ON >/dev/null
	cmake --build $(ASAN_BUILD) -j$(JOBS)

asan-ctest:
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  bash scripts/in-test-tmpdir.sh ctest --test-dir $(ASAN_BUILD) --output-on-failure -j$(JOBS) --timeout 600

# The libFuzzer targets (tests/fuzz, docs/fuzzing.md): a clang tree of their own with ASan and
# UBSan, each target run FUZZ_SECONDS from a copy of its corpus; the last line sums them up, and
# a crash fails it. `make test` runs each corpus once through the same targets (ctest fuzz.*).
fuzz: deps
	@command -v clang++ >/dev/null || { echo "make fuzz: needs clang (apt-get install clang)"; exit 1; }
	@CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DACC_FUZZ=ON -DACC_BUILD_TESTS=OFF -DACC_BUILD_RUNTIME=OFF -DACC_WERROR=$(WERROR) >/dev/null
	cmake --build $(FUZZ_BUILD) -j$(JOBS) --target acc_fuzzers
	@bash scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

# libacc against the LibTorch inside PyTorch 2.x's wheel: it compiles, its one-process tests run,
# and the installed package's consumer builds against it (find_package) and runs one process.
torch2-test: deps test-deps
	@WERROR=$(WERROR) bash scripts/torch2-runtime-test.sh $(TORCH2_TEST_BUILD) $(TORCH2_PYTHON)

check-format:
	@bash scripts/check-format.sh

format:
	@bash scripts/check-format.sh --fix

demo: build
	@bash scripts/demo.sh $(BUILD)

install: build
	cmake --install $(BUILD) --prefix $(or $(PREFIX),/usr/local)

bench: build test-deps
	@bash bench/run_all.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD) $(TORCH2_TEST_BUILD) $(CROSS_BUILD) build-wheel dist
