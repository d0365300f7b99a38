# Makefile: builds the kernelgraph tools into bin/ and runs the test suites.
# Plain GNU make; `make help` lists the targets.

VERSION     = 0.1.0

PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
# what the pipeline scripts source (they look in ../share/kernelgraph from where they are)
DATADIR    ?= $(PREFIX)/share/kernelgraph
CUDA_HOME  ?= /usr/local/cuda
# The folder of the per-GPU locks that every user's kg-bench shares (lib/fileio.h, gpu_lock_dir):
# make install run as root makes it root's, group LOCKGROUP, mode 3770 (members lock, nobody
# else can plant a file or link there, nobody removes another's). /run is emptied at boot:
# the README gives the tmpfiles.d line that makes it again.
LOCKDIR    ?= /run/kernelgraph
LOCKGROUP  ?= kernelgraph
INSTALL    ?= install
PKG_CONFIG ?= pkg-config
BATS       ?= bats
FUZZ_CC    ?= clang
SAN_CC     ?= clang

# SANITIZE=1 builds with AddressSanitizer and UndefinedBehaviorSanitizer into build/san/,
# so a sanitized build never overwrites the tools in bin/; SANITIZE=fuzz (clang) builds the
# libFuzzer harnesses of tests/fuzz/ into build/fuzz/. The sanitized build uses clang
# (SAN_CC), so that `make check` builds and tests the tree with both compilers: the plain
# suite with cc (gcc on Debian), the sanitized one with clang; build/san never mixes them.
ifeq ($(SANITIZE),1)
CC         := $(SAN_CC)
BUILD      := build/san
BINOUT     := build/san/bin
SAN_FLAGS  := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
else ifeq ($(SANITIZE),fuzz)
CC         := $(FUZZ_CC)
BUILD      := build/fuzz
BINOUT     := build/fuzz/bin
SAN_FLAGS  := -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
else
BUILD      := build/release
BINOUT     := bin
SAN_FLAGS  :=
endif

CFLAGS     ?= -O2 -g
# Messages are built with snprintf into bounded buffers on purpose: truncating an overlong
# field path is the wanted behaviour, so -Wformat-truncation would only flag intent.
WARNINGS    = -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
              -Wformat=2 -Wno-format-nonliteral -Wundef -Wpointer-arith $(CC_WARNINGS)
# DEVELOPER=1 (CI sets it) makes every warning an error; a user's build with another
# compiler version is not stopped by a warning that version adds.
ifeq ($(DEVELOPER),1)
WARNINGS   += -Werror
endif
# clang has neither -Wformat-truncation nor -Wcast-align=strict (its -Wcast-align is that).
ifneq ($(findstring clang,$(shell $(CC) --version 2>/dev/null)),)
CC_WARNINGS = -Wcast-align
else
CC_WARNINGS = -Wno-format-truncation -Wcast-align=strict
endif
CJSON_CFLAGS := $(shell $(PKG_CONFIG) --cflags libcjson 2>/dev/null)
CJSON_LIBS   := $(or $(shell $(PKG_CONFIG) --libs libcjson 2>/dev/null),-lcjson)
CRYPTO_LIBS  := $(or $(shell $(PKG_CONFIG) --libs libcrypto 2>/dev/null),-lcrypto)

ALL_CPPFLAGS = -Ilib -DKG_VERSION='"$(VERSION)"' -DKG_LOCK_DIR='"$(LOCKDIR)"' $(CJSON_CFLAGS) $(CPPFLAGS)
ALL_CFLAGS   = -std=c11 $(WARNINGS) $(SAN_FLAGS) $(CFLAGS)
# --as-needed: a tool loads only the libraries it calls (kg-select starts in a third of
# the time without libcrypto, and it starts once per MCGS step).
ALL_LDFLAGS  = -Wl,--as-needed $(SAN_FLAGS) $(LDFLAGS)
BASE_LIBS    = $(CJSON_LIBS) $(CRYPTO_LIBS) -lm

# kg-build and kg-bench (and lib/nvrtc_dl.c) reach NVRTC, the CUDA driver, CUPTI and NVML through dlopen: it needs their headers to build,
# and starts (to say what is missing) on machines without them.
$(BUILD)/tools/build/%.o: ALL_CPPFLAGS += -isystem $(CUDA_HOME)/include -DKG_CUDA_HOME='"$(CUDA_HOME)"'
$(BUILD)/tools/bench/%.o: ALL_CPPFLAGS += -isystem $(CUDA_HOME)/include -DKG_CUDA_HOME='"$(CUDA_HOME)"'
# CUPTI's headers where a toolkit keeps them apart (gpu.c looks for its library there too)
$(BUILD)/tools/bench/%.o: ALL_CPPFLAGS += -isystem $(CUDA_HOME)/extras/CUPTI/include
# CUPTI's profiler host header includes C++'s <string>: an empty one stands in for it.
$(BUILD)/tools/bench/%.o: ALL_CPPFLAGS += -Itools/bench/c-shim
$(BUILD)/lib/nvrtc_dl.o: ALL_CPPFLAGS += -isystem $(CUDA_HOME)/include -DKG_CUDA_HOME='"$(CUDA_HOME)"'
LIBS_build = -ldl
LIBS_bench = -ldl
LIBS_propose = -ldl
LIBS_relabel = -ldl

# A tool exists once tools/<name>/main.c does; each links the shared library and
# what its own LIBS_<name> adds (-ldl, for what it loads at run time: libcurl, NVRTC, CUDA, CUPTI).
TOOLS      := $(patsubst tools/%/main.c,%,$(wildcard tools/*/main.c))
CUDA_TOOLS := build bench
PIPELINES  := $(notdir $(wildcard pipelines/kg-*))
# what the pipelines source (common.sh, kg-report's plots and page), installed in DATADIR
PIPE_LIBS  := $(wildcard pipelines/*.sh)

LIB_SRC    := $(wildcard lib/*.c)
LIB_OBJ    := $(LIB_SRC:%.c=$(BUILD)/%.o)
LIBKG      := $(BUILD)/libkg.a
TEST_DRIVER := $(BUILD)/tests/kg-libtest

TOOL_BINS  := $(TOOLS:%=$(BINOUT)/kg-%)
PIPE_BINS  := $(PIPELINES:%=$(BINOUT)/%)

.PHONY: all benchtools llm-server test test-full test-gpu test-sanitize check lint fuzz fuzz-smoke fuzz-run deps deps-test install uninstall \
        clean cuda-check cuda-found help
.DELETE_ON_ERROR:

all: $(TOOL_BINS) $(PIPE_BINS)

help:
	@echo 'make                 build the tools into bin/'
	@echo 'make deps            install what building and running needs (Debian, as root)'
	@echo 'make deps-test       install that and what the tests need (Debian, as root)'
	@echo 'make test            run the fast CPU test suite (bats, tests/*.bats)'
	@echo 'make test-full       run it with the slow end-to-end files of tests/check/'
	@echo 'make llm-server      build llama-server for the tests (once, into LLM_CACHE) and the tiny model'
	@echo 'make test-sanitize   run the whole CPU test suite under ASan + UBSan'
	@echo 'make check           lint, test-full, test-sanitize and fuzz-smoke (what CI runs)'
	@echo 'make lint            check the test suites for checks that cannot fail'
	@echo 'make fuzz            run each libFuzzer harness of tests/fuzz/ FUZZ_TIME seconds (600)'
	@echo 'make fuzz-smoke      the same, FUZZ_SMOKE_TIME seconds (10) each'
	@echo 'make test-gpu        run the GPU test suite (needs a GPU)'
	@echo 'make benchtools      build the GPU benchmark helpers (cuBLAS) into $(BUILD)/benchmarks'
	@echo 'make cuda-check      check that CUDA_HOME holds the CUDA toolkit'
	@echo 'make install         install into $$(DESTDIR)$$(BINDIR); make uninstall removes it'
	@echo 'make clean           remove build outputs'

$(BUILD)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CPPFLAGS) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<

$(LIBKG): $(LIB_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

# kg-bench compiles its device code at run time (NVRTC): lib/karg_elem.h, which its
# generated Generator fills use too, and harness.cu, each as a C string.
HARNESS_SRC := lib/karg_elem.h tools/bench/harness.cu
EXTRA_OBJ_bench := $(BUILD)/tools/bench/harness_src.o
CSTRING = sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/'
$(BUILD)/tools/bench/harness_src.c: $(HARNESS_SRC) Makefile
	@mkdir -p $(@D)
	{ echo '/* generated by the Makefile from $(HARNESS_SRC) */'; \
	  echo 'extern const char kg_karg_elem_source[], kg_harness_kernels_source[];'; \
	  echo 'const char kg_karg_elem_source[] ='; $(CSTRING) lib/karg_elem.h; echo ';'; \
	  echo 'const char kg_harness_kernels_source[] ='; $(CSTRING) tools/bench/harness.cu; echo ';'; } >$@
$(BUILD)/tools/bench/harness_src.o: $(BUILD)/tools/bench/harness_src.c
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

define TOOL_RULE
$(BINOUT)/kg-$(1): $(patsubst %.c,$(BUILD)/%.o,$(wildcard tools/$(1)/*.c)) $(EXTRA_OBJ_$(1)) $(LIBKG) $(if $(filter $(1),$(CUDA_TOOLS)),| cuda-found)
	@mkdir -p $$(@D)
	$$(CC) $$(ALL_LDFLAGS) -o $$@ $$(filter %.o %.a,$$^) $$(LIBS_$(1)) $$(BASE_LIBS)
endef
$(foreach t,$(TOOLS),$(eval $(call TOOL_RULE,$(t))))

# The pipelines are linked beside the tools they run: a sanitized build runs sanitized tools.
$(BINOUT)/kg-%: pipelines/kg-%
	@mkdir -p $(@D)
	ln -sfr $< $@

# The driver tests kg-build's PTX parser too (ptx-regions).
PTX_OBJ := $(BUILD)/tools/build/ptx_regions.o $(BUILD)/tools/build/ptx_profile.o
DRIVER_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(wildcard tests/driver/*.c))
$(DRIVER_OBJ): ALL_CPPFLAGS += -Itools/build
$(TEST_DRIVER): $(DRIVER_OBJ) $(EXTRA_OBJ_bench) $(PTX_OBJ) $(LIBKG)
	@mkdir -p $(@D)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(BASE_LIBS)

# Benchmark helpers, never installed: built for the GPU scripts in benchmarks/ (cuBLAS).
BENCH_TOOLS := $(BUILD)/benchmarks/check-reference
benchtools: $(BENCH_TOOLS)
$(BUILD)/benchmarks/%.o: ALL_CPPFLAGS += -isystem $(CUDA_HOME)/include
$(BUILD)/benchmarks/check-reference: $(BUILD)/benchmarks/check_reference.o $(LIBKG) | cuda-found
	@mkdir -p $(@D)
	$(CC) $(ALL_LDFLAGS) -o $@ $(filter %.o %.a,$^) -L$(CUDA_HOME)/lib64 -lcublas -lcudart_static -ldl -lrt -lpthread $(BASE_LIBS)

# cuda-found, before building the tools that need the toolkit, says only what is missing;
# cuda-check, asked for, says where it found it too.
# Debian's own toolkit (non-free nvidia-cuda-toolkit, 11.8 in Debian 12) has NVRTC but not the
# CUPTI that kg-bench is built against: said here, not as a missing header in the middle of the build.
cuda-found:
	@test -f '$(CUDA_HOME)/include/nvrtc.h' || { \
	  echo "kernelgraph: no CUDA toolkit in CUDA_HOME=$(CUDA_HOME) ($(CUDA_HOME)/include/nvrtc.h is missing);" \
	       "install the CUDA toolkit (README.md, \"Set up\") or run make CUDA_HOME=/path/to/cuda" >&2; exit 1; }
	@test -f '$(CUDA_HOME)/include/cupti_range_profiler.h' || test -f '$(CUDA_HOME)/extras/CUPTI/include/cupti_range_profiler.h' || { \
	  echo "kernelgraph: the CUDA toolkit in CUDA_HOME=$(CUDA_HOME) has no CUPTI range profiler (cupti_range_profiler.h);" \
	       "kernelgraph needs CUDA 13 (README.md, \"Set up\")" >&2; exit 1; }
cuda-check: cuda-found
	@echo "kernelgraph: the CUDA toolkit is in CUDA_HOME=$(CUDA_HOME) ($(CUDA_HOME)/include/nvrtc.h)"

# The tests' real LLM server: llama.cpp's llama-server from the sources vendored in the
# llama-cpp-python sdist on PyPI, built once (CPU only, the server alone) into LLM_CACHE,
# outside the checkout, so that neither `make clean` nor a second worktree rebuilds it; and
# the tiny random model tests/tools/tiny_gguf.py writes with PyPI's gguf. `make test-full` tries
# it; where it cannot be built, tests/check/12-llama-server.bats says why (and fails under CI=true).
LLAMA_CPP_PYTHON_VERSION = 0.3.36
GGUF_VERSION = 0.19.0
LLM_CACHE  ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/kernelgraph
LLM_JOBS   ?= $(shell nproc 2>/dev/null || echo 2)
TINY_GGUF  := build/llm/tiny.gguf

llm-server:
	tests/tools/llm_server_build.sh '$(LLM_CACHE)' $(LLAMA_CPP_PYTHON_VERSION) $(GGUF_VERSION) $(TINY_GGUF) $(LLM_JOBS)

# The suite runs its files at once (bats --jobs, through GNU parallel where it is installed:
# make deps-test installs it): its tests wait on compilers, pipelines and servers as much as
# they compute, so three a core keep two cores busy. make test runs tests/*.bats, the fast
# suite (3 minutes on two cores); tests/check/ holds the slow end-to-end files, the real
# llama-server and the Slurm cluster among them, which make check runs as well, with the fast
# ones in the same bats run, once per compiler.
# Whether parallel is there is asked when the suite starts, not when make reads this file:
# `make deps-test check` installs it in between.
BATS_JOBS  ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 2) * 3 )))
BATS_FLAGS ?= $$(command -v parallel >/dev/null && echo --jobs $(BATS_JOBS))
TEST_ENV    = KG_BIN_DIR=$(CURDIR)/$(BINOUT) KG_TEST_DRIVER=$(CURDIR)/$(TEST_DRIVER) KG_TINY_GGUF=$(CURDIR)/$(TINY_GGUF)

test: all $(TEST_DRIVER)
	$(TEST_ENV) $(BATS) $(BATS_FLAGS) tests

# The whole suite: the fast files and tests/check/, whose llama-server is built first.
test-full: all $(TEST_DRIVER)
	-@$(MAKE) --no-print-directory llm-server
	$(TEST_ENV) $(BATS) $(BATS_FLAGS) tests tests/check

test-sanitize:
	$(MAKE) SANITIZE=1 test-full

check: lint test-full test-sanitize fuzz-smoke

# A bats test fails only on its last command's status or a `run` check: a line that starts
# with "! " elsewhere can never fail it. shellcheck checks every pipeline script with what it
# sources (pipelines/.shellcheckrc), and each sourced file alone.
SHELLCHECK ?= shellcheck
lint:
	tests/lint-bats.sh tests/*.bats tests/check/*.bats tests/gpu/*.bats
	$(SHELLCHECK) $(PIPELINES:%=pipelines/%) $(PIPE_LIBS)

# libFuzzer harnesses: tests/fuzz/fuzz_NAME.c, seeded from tests/fuzz/corpus/NAME/; what
# a run finds goes to build/fuzz/corpus/NAME/ (new inputs) and build/fuzz/fuzz_NAME-crash-*.
# FUZZ_EXTRA_NAME: the objects a harness needs beyond the library.
FUZZERS := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_TIME ?= 600
FUZZ_SMOKE_TIME ?= 10
FUZZ_EXTRA_graph := tools/select/graph.c tools/select/snapshot.c
$(BUILD)/tests/fuzz/fuzz_graph.o: ALL_CPPFLAGS += -Itools/select
define FUZZ_RULE
$(BUILD)/fuzz_$(1): $(BUILD)/tests/fuzz/fuzz_$(1).o $(patsubst %.c,$(BUILD)/%.o,$(FUZZ_EXTRA_$(1))) $(LIBKG)
	$$(CC) $$(ALL_LDFLAGS) -fsanitize=fuzzer -o $$@ $$^ $$(BASE_LIBS)
endef
$(foreach f,$(FUZZERS),$(eval $(call FUZZ_RULE,$(f))))

fuzz:
	$(MAKE) SANITIZE=fuzz fuzz-run FUZZ_SECONDS=$(FUZZ_TIME)
fuzz-smoke:
	$(MAKE) SANITIZE=fuzz fuzz-run FUZZ_SECONDS=$(FUZZ_SMOKE_TIME)
fuzz-run: $(FUZZERS:%=$(BUILD)/fuzz_%)
	@for f in $(FUZZERS); do \
	  mkdir -p $(BUILD)/corpus/$$f && echo "fuzz_$$f: $(FUZZ_SECONDS) s" && \
	  $(BUILD)/fuzz_$$f -max_total_time=$(FUZZ_SECONDS) -max_len=131072 -print_final_stats=1 \
	    -artifact_prefix=$(BUILD)/fuzz_$$f- $(BUILD)/corpus/$$f tests/fuzz/corpus/$$f 2>$(BUILD)/fuzz_$$f.log || \
	    { tail -n 40 $(BUILD)/fuzz_$$f.log; exit 1; }; \
	  grep -E '^stat::(number_of_executed_units|new_units_added|peak_rss_mb)' $(BUILD)/fuzz_$$f.log | tr '\n' ' '; echo; \
	done

test-gpu: all $(TEST_DRIVER)
	KG_BIN_DIR=$(CURDIR)/$(BINOUT) KG_TEST_DRIVER=$(CURDIR)/$(TEST_DRIVER) $(BATS) tests/gpu

# Debian packages. DEB_RUN is what building and running needs: the compiler and the
# libraries, jq, GNU patch and flock (util-linux) for the pipelines, gnuplot, Graphviz and column
# (bsdextrautils) for kg-report's plots, graph and tables, ca-certificates for an LLM endpoint
# over HTTPS. DEB_TEST is what the tests add: bats and its libraries, GNU parallel (make test
# runs the files at once), python3, which recomputes the tests' expected values with CPython
# itself, clang and its sanitizer runtime (make check's second build, the fuzzers), chromium
# (kg-report's page opened in its test), munge and Slurm (the one-node cluster of
# tests/check/85-slurm.bats), cmake, g++ and python3-venv (the tests' llama-server and the
# environment that writes its model), curl (the llama-server test asks the server directly), time (/usr/bin/time, for benchmarks/), and shellcheck
# (make lint checks the pipeline scripts).
DEB_RUN  = gcc make pkg-config libc6-dev libcurl4-openssl-dev libcjson-dev libssl-dev ca-certificates \
           jq patch util-linux gnuplot-nox bsdextrautils graphviz
DEB_TEST = bats bats-support bats-assert parallel python3 python3-venv cmake g++ curl time \
           clang libclang-rt-dev chromium munge slurmctld slurmd slurm-client shellcheck

# deps_install PACKAGES: apt-get installs them, through sudo when not root.
define deps_install
	@if [ "$$(id -u)" -ne 0 ] && ! command -v sudo >/dev/null; then \
	  echo 'make $@: run as root (apt-get installs system packages)' >&2; exit 1; fi
	$$( [ "$$(id -u)" -eq 0 ] || echo sudo ) apt-get update -q
	$$( [ "$$(id -u)" -eq 0 ] || echo sudo ) env DEBIAN_FRONTEND=noninteractive \
	  apt-get install -y -q --no-install-recommends $(1)
endef

deps:
	$(call deps_install,$(DEB_RUN))

deps-test:
	$(call deps_install,$(DEB_RUN) $(DEB_TEST))

install: all
	$(INSTALL) -d '$(DESTDIR)$(BINDIR)'
	$(INSTALL) -m 755 $(TOOL_BINS) $(PIPELINES:%=pipelines/%) '$(DESTDIR)$(BINDIR)'
	$(INSTALL) -d '$(DESTDIR)$(DATADIR)'
	$(INSTALL) -m 644 $(PIPE_LIBS) '$(DESTDIR)$(DATADIR)'
	@if [ "$$(id -u)" -eq 0 ] && getent group '$(LOCKGROUP)' >/dev/null; then \
	  echo "$(INSTALL) -d -m 3770 -o root -g $(LOCKGROUP) '$(DESTDIR)$(LOCKDIR)'"; \
	  $(INSTALL) -d -m 3770 -o root -g '$(LOCKGROUP)' '$(DESTDIR)$(LOCKDIR)'; \
	else echo "make install: no $(LOCKDIR) (needs root and the group $(LOCKGROUP)): each user's kg-bench locks the GPU in \$$XDG_RUNTIME_DIR/kernelgraph"; fi

uninstall:
	rm -f $(foreach f,$(TOOLS:%=kg-%) $(PIPELINES),'$(DESTDIR)$(BINDIR)/$(f)') $(foreach f,$(notdir $(PIPE_LIBS)),'$(DESTDIR)$(DATADIR)/$(f)')

clean:
	rm -rf build $(TOOLS:%=bin/kg-%) $(PIPELINES:%=bin/%)
	-rmdir bin 2>/dev/null || true

-include $(shell find build -name '*.d' 2>/dev/null)
