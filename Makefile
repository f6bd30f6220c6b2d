# The two commands of the README: `make demo` and `make test`. Each installs what is missing
# (Debian packages, through scripts/install-deps.sh), builds, then runs.
BUILD       ?= build
ASAN_BUILD  ?= build-asan
JOBS        ?= $(shell nproc)
WERROR      ?= $(if $(CI),ON,OFF)
CMAKE_FLAGS ?=
PYTHON      ?= /usr/bin/python3

.PHONY: all deps test-deps configure build test unit-test asan-test check-format format demo install bench clean

all: build

deps:
	@bash scripts/install-deps.sh

# What only the tests use (schedulers, sshd, etcd, debuggers, PyTorch's Python peer).
test-deps:
	@bash scripts/install-deps.sh --test

configure: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DACC_WERROR=$(WERROR) $(CMAKE_FLAGS) >/dev/null

build: configure
	cmake --build $(BUILD) -j$(JOBS)

# Format check and the sanitized build come first; the full suite's ctest summary closes the run.
test: check-format asan-test unit-test

unit-test: build test-deps
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS) --timeout 600

asan-test: deps test-deps
	@cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DACC_SANITIZE=ON -DACC_WERROR=$(WERROR) >/dev/null
	cmake --build $(ASAN_BUILD) -j$(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --test-dir $(ASAN_BUILD) --output-on-failure -j$(JOBS) --timeout 600

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
	rm -rf $(BUILD) $(ASAN_BUILD)
