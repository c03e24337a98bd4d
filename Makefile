# kvplan: top-level build.
#
#   make                  build ./kvplan (with the CUDA backend when nvcc is found)
#   make check            build and run every test suite (Check), printing its summary
#   make check SANITIZE=1 the same under ASan + UBSan, in build-san/
#   make check UBSAN=1    the same under UBSan with float-cast-overflow (CC=clang in CI), in build-ubsan/
#   make fuzz             build the libFuzzer targets in tests/fuzz/ with clang (make setup FUZZ=1)
#   make fuzz-ci          run each fuzz target for FUZZ_SECONDS (60) from the seeds
#   make bench            benchmarks: figures and ratios, never pass/fail
#   make setup            install the Debian packages the build needs (scripts/install-deps)
#   make demo             run the main job on the bundled chat scenario
#   make install          install into PREFIX (default /usr/local; DESTDIR for staging)
#   make validate-published  predict validation/published.tsv uncalibrated; print the errors
#   make validate-kernels    compare the cost model with the H200 kernel measurements (validation/h200-2026-11-30)
#   make clean            remove every build output
#
# CUDA=0 forces a CPU-only build; NVCC=/path picks the compiler. The CUDA backend is a plugin,
# build/libkvplan-cuda.so, that kvplan opens with dlopen only for the commands that use it
# (run/validate/calibrate --backend cuda, selftest, kernel-bench); the binary links no CUDA.

SANITIZE ?= 0
UBSAN ?= 0
ifeq ($(SANITIZE),1)
BUILD := build-san
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
# The CUDA static runtime is not built with the sanitizers; the sanitized build is CPU-only.
CUDA := 0
else ifeq ($(UBSAN),1)
# UBSan alone, plus the float-to-integer overflow check that -fsanitize=undefined leaves out
# (gcc and clang both have it); any report fails the run.
BUILD := build-ubsan
SANFLAGS := -fsanitize=undefined,float-cast-overflow -fno-sanitize-recover=all -fno-omit-frame-pointer
CUDA := 0
else
BUILD := build
SANFLAGS :=
endif

CC ?= cc
NVCC ?= $(or $(shell command -v nvcc 2>/dev/null),$(wildcard /usr/local/cuda/bin/nvcc))
CUDA ?= $(if $(NVCC),1,0)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))

VERSION := 0.1.0
PKGS := yaml-0.1 libpcre2-8 jansson sqlite3 openblas
# What the binaries link: all but OpenBLAS, which only the CPU backend uses and opens at run time
# (backend/cpu/cpu_blas.h: linking it cost every process ~6 ms of relocations at start-up).
LINK_PKGS := $(filter-out openblas,$(PKGS))
CFLAGS ?= -O2 -g
CFLAGS += -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Wstrict-prototypes -Wshadow \
          -MMD -MP $(SANFLAGS) -DKVPLAN_VERSION='"$(VERSION)"' -DKVPLAN_SRCDIR='"$(CURDIR)"' \
          $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LDLIBS = $(shell pkg-config --libs $(LINK_PKGS) 2>/dev/null) -ldl -lpthread -lm
LDFLAGS += $(SANFLAGS)
CHECK_LIBS = $(shell pkg-config --cflags --libs check 2>/dev/null)

LIB_SRC := $(wildcard loader/*.c model/*.c sim/*.c db/*.c backend/*.c backend/cpu/*.c verify/*.c planner/*.c)
CLI_SRC := $(wildcard cli/*.c)
MPI ?= 0
MPICC ?= mpicc
TEST_SRC := $(wildcard tests/*.c)
BENCH_SRC := $(wildcard bench/*.c)
CU_SRC := $(wildcard backend/cuda/*.cu)

# ---- the CUDA plugin ----
# The binary looks for the plugin beside itself, in ../lib/kvplan, then in its build folder
# (build-san/ has none: the sanitized build stays CPU-only).
CFLAGS += -DKVPLAN_PLUGINDIR='"$(CURDIR)/$(BUILD)"'
PREFIX ?= /usr/local
PLUGIN_FILE := libkvplan-cuda.so
# The plugin carries its own PIC copies of the CPU reference kernels its selftest compares with.
PLUGIN_C_SRC := backend/cpu/cpu_ops.c backend/cpu/cpu_blas.c backend/cpu/kv_format.c
# Where cpu_blas.c looks for libopenblas.so.0 after the loader's own path: the folder linked against.
$(BUILD)/backend/cpu/cpu_blas.o $(BUILD)/pic/backend/cpu/cpu_blas.o: CFLAGS += -DKVPLAN_OPENBLAS_DIR='"$(patsubst %/,%,$(shell pkg-config --variable=libdir openblas 2>/dev/null))"'
ifeq ($(CUDA),1)
NVFLAGS := -O2 -std=c++17 -gencode arch=compute_90,code=[sm_90,compute_90] -Xcompiler -Wall,-fPIC
PLUGIN := $(BUILD)/$(PLUGIN_FILE)
PLUGIN_OBJ := $(CU_SRC:%.cu=$(BUILD)/%.o) $(PLUGIN_C_SRC:%.c=$(BUILD)/pic/%.o)
BUILD_KIND := CPU binary + CUDA plugin $(PLUGIN) (nvcc: $(NVCC); sm_90 + PTX)
else
PLUGIN :=
BUILD_KIND := CPU-only ($(if $(NVCC),CUDA=0 or SANITIZE=1,nvcc not found))
endif

LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o) $(BUILD)/db/schema_sql.o
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/%.o)
BENCH_OBJ := $(BENCH_SRC:%.c=$(BUILD)/%.o)
BIN := $(BUILD)/kvplan

.PHONY: all check check-mpi bench setup demo clean deps-check layering install install-check install-cuda validate-published validate-kernels \
        fuzz fuzz-ci
all: deps-check $(BIN) kvplan $(PLUGIN) $(if $(filter 1,$(MPI)),$(BUILD)/kvplan-mpi)

deps-check:
	@pkg-config --exists $(PKGS) || { echo "missing build dependencies: run 'make setup' (scripts/install-deps)" >&2; exit 1; }
	@echo "kvplan: building $(BUILD_KIND)"

# The top-level ./kvplan is the unsanitized build; it finds the library in ./scenarios.
kvplan: $(BIN)
	@if [ "$(BUILD)" = build ]; then cp $(BIN) kvplan; fi

$(BIN): $(CLI_OBJ) $(BUILD)/libkvplan.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# The MPI planner: the CLI's objects (all but main.o) with an MPI main, linked by mpicc.
$(BUILD)/cli/mpi/plan_mpi.o: cli/mpi/plan_mpi.c
	@mkdir -p $(dir $@)
	$(MPICC) $(CFLAGS) -c -o $@ $<

$(BUILD)/kvplan-mpi: $(BUILD)/cli/mpi/plan_mpi.o $(filter-out $(BUILD)/cli/main.o,$(CLI_OBJ)) $(BUILD)/libkvplan.a
	$(MPICC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

check-mpi: deps-check $(BIN) $(BUILD)/kvplan-mpi
	@command -v mpirun >/dev/null || { echo "OpenMPI is missing: run 'make setup MPI=1'" >&2; exit 1; }
	KVPLAN_LIBRARY=$(CURDIR)/scenarios bash tests/mpi-check.sh $(BUILD)

$(BUILD)/libkvplan.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

# db/schema.sql is the one source of the schema; the build embeds it as a C string.
$(BUILD)/db/schema_sql.c: db/schema.sql
	@mkdir -p $(dir $@)
	{ echo 'const char DB_SCHEMA_SQL[] ='; sed 's/\\/\\\\/g; s/"/\\"/g; s/.*/"&\\n"/' $<; echo ';'; } > $@

$(BUILD)/db/schema_sql.o: $(BUILD)/db/schema_sql.c
	$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/pic/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fPIC -c -o $@ $<

# The plugin: CUDA runtime linked statically, cuBLAS opened at run time (backend/cuda/gemm.cu;
# the rpath is where it looks first), one exported symbol (plugin.map).
$(BUILD)/$(PLUGIN_FILE): $(PLUGIN_OBJ) backend/cuda/plugin.map
	$(NVCC) -shared -o $@ $(PLUGIN_OBJ) -Xlinker --version-script=backend/cuda/plugin.map \
	  -Xlinker -rpath=$(CUDA_HOME)/lib64 -Xlinker --no-undefined $(shell pkg-config --libs openblas 2>/dev/null) -ldl -lrt -lpthread

# `make install` calls this; a CPU-only build has no plugin to install.
install-cuda: $(PLUGIN)
ifeq ($(CUDA),1)
	install -D -m 0755 $(PLUGIN) $(DESTDIR)$(PREFIX)/lib/kvplan/$(PLUGIN_FILE)
else
	@echo "kvplan: CPU-only build: no CUDA plugin to install"
endif

$(BUILD)/run_tests: $(TEST_OBJ) $(BUILD)/libkvplan.a
	$(CC) $(LDFLAGS) -o $@ $^ $(CHECK_LIBS) $(LDLIBS)

$(BUILD)/tests/%.o: CFLAGS += $(shell pkg-config --cflags check 2>/dev/null)

# Stand-ins for the CUDA plugin, so the plugin machinery is tested without CUDA (tests/test_cuda_plugin.c).
FAKE_PLUGINS := $(BUILD)/tests/fake-cuda-plugin.so $(BUILD)/tests/fake-cuda-plugin-abi1.so
$(BUILD)/tests/fake-cuda-plugin.so: tests/plugin/fake_cuda_plugin.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fPIC -shared -o $@ $<
$(BUILD)/tests/fake-cuda-plugin-abi1.so: tests/plugin/fake_cuda_plugin.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DFAKE_ABI=1 -fPIC -shared -o $@ $<


# The folder DAG loader -> model -> sim -> {backend, db} -> {verify, planner} -> cli, from every #include.
layering:
	@bash tests/layering.sh

check: deps-check layering $(BIN) $(BUILD)/run_tests $(FAKE_PLUGINS) install-check
	@pkg-config --exists check || { echo "the Check library is missing: run 'make setup'" >&2; exit 1; }
	@# User output (calibrated profiles) goes to a throwaway data directory, never the user's.
	@# The sanitizers slow everything severalfold: the hang guards (Check timeouts) stretch with them.
	KVPLAN_BIN=$(CURDIR)/$(BIN) KVPLAN_LIBRARY=$(CURDIR)/scenarios KVPLAN_TESTS=$(CURDIR)/tests \
	  XDG_DATA_HOME=$$(mktemp -d /tmp/kvplan-xdg-XXXXXX) $(if $(filter 1,$(SANITIZE)),CK_TIMEOUT_MULTIPLIER=4) \
	  $(BUILD)/run_tests

$(BUILD)/run_bench: $(BENCH_OBJ) $(BUILD)/libkvplan.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

bench: deps-check $(BUILD)/run_bench $(BIN)
	KVPLAN_LIBRARY=$(CURDIR)/scenarios KVPLAN_BIN=$(CURDIR)/$(BIN) $(BUILD)/run_bench
	@echo "  planner: capacity on every bundled scenario, plan on chat, the 500-candidate plan (BENCH_SWEEP=0 skips it):"
	@KVPLAN_LIBRARY=$(CURDIR)/scenarios sh bench/planner-times.sh $(BIN) $(if $(filter 0,$(BENCH_SWEEP)),--no-sweep)
	@echo "  start-up of commands that need no GPU, on this build (goal: < 50 ms and < 20 MiB, the CUDA build too):"
	@command -v /usr/bin/time >/dev/null || echo "    (skipped: /usr/bin/time is not installed)"
	@if [ -x /usr/bin/time ]; then for c in --version "memory scenarios/chat.yaml" "cost scenarios/chat.yaml"; do \
	  for i in 1 2 3 4 5; do s=$$(date +%s%N); KVPLAN_LIBRARY=$(CURDIR)/scenarios /usr/bin/time -f %M -o $(BUILD)/startup-rss.txt $(BIN) $$c >/dev/null 2>&1; \
	    e=$$(date +%s%N); echo "$$(( (e - s) / 1000 )) $$(cat $(BUILD)/startup-rss.txt)"; done | sort -n | \
	  awk -v c="$$c" 'NR == 3 { printf "    kvplan %-26s %7.1f ms wall (median of 5), %6.1f MiB peak RSS\n", c, $$1 / 1000, $$2 / 1024 }'; done; fi
	@echo "  validate tiny-cpu on the CPU reference backend (calibrates first; aim: median |error| <= 10 %):"
	KVPLAN_LIBRARY=$(CURDIR)/scenarios $(BIN) validate scenarios/tiny-cpu.yaml --no-db

setup:
	MPI=$(MPI) FUZZ=$(FUZZ) bash scripts/install-deps

# ---- fuzzing (libFuzzer, clang) ----
# The library is rebuilt in build-fuzz/ with coverage instrumentation and ASan + UBSan; each
# target in tests/fuzz/ links against it. Seeds: tests/fuzz/seeds/, the bundled scenarios and
# tests/data; libFuzzer adds what it finds to build-fuzz/corpus/ (never committed).
FUZZ_CC ?= clang
FUZZ_SAN := -fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_TARGETS := scenario units import trace
FUZZ_SECONDS ?= 60
FUZZ_BIN := $(FUZZ_TARGETS:%=build-fuzz/fuzz_%)

fuzz: deps-check
	@command -v $(FUZZ_CC) >/dev/null || { echo "clang is missing: run 'make setup FUZZ=1'" >&2; exit 1; }
	$(MAKE) --no-print-directory BUILD=build-fuzz CC=$(FUZZ_CC) CUDA=0 SANFLAGS="$(FUZZ_SAN) -fsanitize=fuzzer-no-link" build-fuzz/libkvplan.a
	$(MAKE) --no-print-directory $(FUZZ_BIN) fuzz-seeds

build-fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_common.h build-fuzz/libkvplan.a
	$(FUZZ_CC) -g -O1 -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra $(FUZZ_SAN) -fsanitize=fuzzer \
	  $(shell pkg-config --cflags $(PKGS) 2>/dev/null) -o $@ $< build-fuzz/libkvplan.a \
	  $(shell pkg-config --libs $(LINK_PKGS) 2>/dev/null) -ldl -lpthread -lm

.PHONY: fuzz-seeds
fuzz-seeds:
	@for t in $(FUZZ_TARGETS); do mkdir -p build-fuzz/seeds/$$t build-fuzz/corpus/$$t; \
	  cp tests/fuzz/seeds/$$t/* build-fuzz/seeds/$$t/ 2>/dev/null || true; done
	@for f in scenarios/*.yaml scenarios/*/*.yaml; do cp $$f build-fuzz/seeds/scenario/$$(echo $$f | tr / _); done
	@find tests/data -maxdepth 1 -type f -exec cp {} build-fuzz/seeds/import/ \;
	@echo "fuzz: targets in build-fuzz/ (fuzz_scenario, fuzz_units, fuzz_import, fuzz_trace); seeds in build-fuzz/seeds/"

# Each target for FUZZ_SECONDS from its seeds; a crash, a leak, a UBSan report, a 30 s input
# or 2 GB of memory fails the run and leaves the input in build-fuzz/.
fuzz-ci: fuzz
	@mkdir -p build-fuzz/logs; for t in $(FUZZ_TARGETS); do \
	  dict=; [ -f tests/fuzz/$$t.dict ] && dict=-dict=../tests/fuzz/$$t.dict; \
	  echo "fuzz-ci: $$t for $(FUZZ_SECONDS) s"; \
	  ( cd build-fuzz && ./fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -timeout=30 -rss_limit_mb=2048 -max_len=65536 \
	      -print_final_stats=1 $$dict -artifact_prefix=$$t- corpus/$$t seeds/$$t ) >build-fuzz/logs/$$t.log 2>&1; \
	  rc=$$?; grep -E "^(#[0-9]+[[:space:]]+DONE|stat::number_of_executed_units|stat::peak_rss_mb)" build-fuzz/logs/$$t.log; \
	  if [ $$rc -ne 0 ]; then tail -60 build-fuzz/logs/$$t.log; echo "fuzz-ci: $$t failed (input in build-fuzz/$$t-*)"; exit 1; fi; \
	done

# make install PREFIX=... [DESTDIR=...]: the binary, the YAML library, the chart libraries
# (when `make setup` fetched them) and the man page. The binary finds its library in
# $(PREFIX)/share/kvplan wherever the prefix is moved; user output never goes there.
PREFIX ?= /usr/local
SHARE = $(DESTDIR)$(PREFIX)/share/kvplan
install: $(BIN) $(if $(PLUGIN),install-cuda)
	install -d $(DESTDIR)$(PREFIX)/bin $(SHARE) $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 755 $(BIN) $(DESTDIR)$(PREFIX)/bin/kvplan
	cd scenarios && find . -name '*.yaml' -exec install -D -m 644 {} $(SHARE)/scenarios/{} \;
	for lib in vega vega-lite vega-embed; do \
	  if [ -f node_modules/$$lib/build/$$lib.min.js ]; then \
	    install -D -m 644 node_modules/$$lib/build/$$lib.min.js $(SHARE)/node_modules/$$lib/build/$$lib.min.js; fi; done
	install -m 644 docs/kvplan.1 $(DESTDIR)$(PREFIX)/share/man/man1/kvplan.1

# Installs into a temporary prefix and runs `memory` from there (part of `make check`).
install-check: $(BIN)
	@bash tests/install-check.sh "$(MAKE) --no-print-directory SANITIZE=$(SANITIZE) CUDA=$(CUDA)" $(BIN)

demo: all
	./kvplan plan scenarios/chat.yaml --no-db

# The test set of public measurements (docs/validation.md): predicted with the bundled,
# uncalibrated library; nothing is fitted to it.
PUBLISHED ?= validation/published.tsv
validate-published: deps-check $(BIN)
	@test -f $(PUBLISHED) || { echo "$(PUBLISHED) is missing (PUBLISHED=FILE picks another table)" >&2; exit 66; }
	KVPLAN_LIBRARY=$(CURDIR)/scenarios $(BIN) validate-published $(PUBLISHED)

# Our own H200 kernel measurements against the cost model (docs/validation.md, "H200
# measurements (2026-11-30)"); KERNELS=DIR picks another measurement folder.
KERNELS ?= validation/h200-2026-11-30
validate-kernels: deps-check $(BIN)
	@test -d $(KERNELS) || { echo "$(KERNELS) is missing (KERNELS=DIR picks another folder)" >&2; exit 66; }
	KVPLAN_LIBRARY=$(CURDIR)/scenarios $(BIN) validate-kernels $(KERNELS)

clean:
	rm -rf build build-san build-ubsan build-fuzz kvplan tests/out

-include $(shell find build build-san build-ubsan build-fuzz -name '*.d' 2>/dev/null)
