# kvplan: top-level build.
#
#   make                  build ./kvplan (with the CUDA backend when nvcc is found)
#   make check            build and run every test suite (Check), printing its summary
#   make check SANITIZE=1 the same under ASan + UBSan, in build-san/
#   make bench            benchmarks: figures and ratios, never pass/fail
#   make setup            install the Debian packages the build needs (scripts/install-deps)
#   make demo             run the main job on the bundled chat scenario
#   make install          install into PREFIX (default /usr/local; DESTDIR for staging)
#   make validate-published  predict validation/published.tsv uncalibrated; print the errors
#   make clean            remove every build output
#
# CUDA=0 forces a CPU-only build; NVCC=/path picks the compiler.

SANITIZE ?= 0
ifeq ($(SANITIZE),1)
BUILD := build-san
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
# The CUDA static runtime is not built with the sanitizers; the sanitized build is CPU-only.
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
CFLAGS ?= -O2 -g
CFLAGS += -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Wstrict-prototypes -Wshadow \
          -MMD -MP $(SANFLAGS) -DKVPLAN_VERSION='"$(VERSION)"' -DKVPLAN_SRCDIR='"$(CURDIR)"' \
          $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LDLIBS = $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lpthread -lm
LDFLAGS += $(SANFLAGS)
CHECK_LIBS = $(shell pkg-config --cflags --libs check 2>/dev/null)

LIB_SRC := $(wildcard loader/*.c model/*.c sim/*.c db/*.c backend/*.c backend/cpu/*.c verify/*.c planner/*.c)
CLI_SRC := $(wildcard cli/*.c)
MPI ?= 0
MPICC ?= mpicc
TEST_SRC := $(wildcard tests/*.c)
BENCH_SRC := $(wildcard bench/*.c)
CU_SRC := $(wildcard backend/cuda/*.cu)

ifeq ($(CUDA),1)
CFLAGS += -DKVPLAN_CUDA=1
NVFLAGS := -O2 -std=c++17 -gencode arch=compute_90,code=[sm_90,compute_90] -Xcompiler -Wall
LIB_OBJ_CU := $(CU_SRC:%.cu=$(BUILD)/%.o)
LDLIBS += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublas -lcudart_static -ldl -lrt -lstdc++
BUILD_KIND := CUDA (nvcc: $(NVCC); sm_90 + PTX)
else
LIB_OBJ_CU :=
BUILD_KIND := CPU-only ($(if $(NVCC),CUDA=0 or SANITIZE=1,nvcc not found))
endif

LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o) $(BUILD)/db/schema_sql.o $(LIB_OBJ_CU)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/%.o)
BENCH_OBJ := $(BENCH_SRC:%.c=$(BUILD)/%.o)
BIN := $(BUILD)/kvplan

.PHONY: all check check-mpi bench setup demo clean deps-check layering install install-check validate-published
all: deps-check $(BIN) kvplan $(if $(filter 1,$(MPI)),$(BUILD)/kvplan-mpi)

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
	$(NVCC) $(NVFLAGS) -c -o $@ $<

$(BUILD)/run_tests: $(TEST_OBJ) $(BUILD)/libkvplan.a
	$(CC) $(LDFLAGS) -o $@ $^ $(CHECK_LIBS) $(LDLIBS)

$(BUILD)/tests/%.o: CFLAGS += $(shell pkg-config --cflags check 2>/dev/null)

# The folder DAG loader -> model -> sim -> {backend, db} -> {verify, planner} -> cli, from every #include.
layering:
	@bash tests/layering.sh

check: deps-check layering $(BIN) $(BUILD)/run_tests install-check
	@pkg-config --exists check || { echo "the Check library is missing: run 'make setup'" >&2; exit 1; }
	@# User output (calibrated profiles) goes to a throwaway data directory, never the user's.
	KVPLAN_BIN=$(CURDIR)/$(BIN) KVPLAN_LIBRARY=$(CURDIR)/scenarios KVPLAN_TESTS=$(CURDIR)/tests \
	  XDG_DATA_HOME=$$(mktemp -d /tmp/kvplan-xdg-XXXXXX) $(BUILD)/run_tests

$(BUILD)/run_bench: $(BENCH_OBJ) $(BUILD)/libkvplan.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

bench: deps-check $(BUILD)/run_bench $(BIN)
	KVPLAN_LIBRARY=$(CURDIR)/scenarios $(BUILD)/run_bench
	@echo "  plan a 500-candidate sweep over 10,000 chat requests on all cores (goal: under a minute):"
	@start=$$(date +%s.%N); KVPLAN_LIBRARY=$(CURDIR)/scenarios $(BIN) plan bench/sweep-500.yaml --no-db --no-rules --top 3 --format csv >/dev/null; \
	  end=$$(date +%s.%N); awk "BEGIN { printf \"    500 candidates x 10000 requests: %.1f s on %d cores\\n\", $$end - $$start, $$(nproc) }"
	@echo "  validate tiny-cpu on the CPU reference backend (calibrates first; aim: median |error| <= 10 %):"
	KVPLAN_LIBRARY=$(CURDIR)/scenarios $(BIN) validate scenarios/tiny-cpu.yaml --no-db

setup:
	MPI=$(MPI) bash scripts/install-deps

# make install PREFIX=... [DESTDIR=...]: the binary, the YAML library, the chart libraries
# (when `make setup` fetched them) and the man page. The binary finds its library in
# $(PREFIX)/share/kvplan wherever the prefix is moved; user output never goes there.
PREFIX ?= /usr/local
SHARE = $(DESTDIR)$(PREFIX)/share/kvplan
install: $(BIN)
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

clean:
	rm -rf build build-san kvplan tests/out

-include $(shell find build build-san -name '*.d' 2>/dev/null)
