# ladle - build, test, benchmark, install.
#
#   make              lib/libladle.a, lib/libladle.so, the tools in bin/
#   make demo         the main job: LeNet-5 on Fashion-MNIST on 4 ranks (installs
#                     missing Debian packages first)
#   make tour         the primitives on 6 ranks, with their adjoint mismatches
#   make check        the whole test suite under MPI at several rank counts, and
#                     the C ABI (make check-abi: install, symbols, pkg-config and
#                     CMake users, a program of another MPI)
#   make bench        benchmarks against the raw MPI calls and the BLAS
#   make bench-torch  the layers, a ResNet-20 step and a GPT step next to PyTorch's (needs python3-torch)
#   make bench-overhead  a ladle call from PyTorch (ladle.torch) next to the same call from C
#   make bench-distdl    the LeNet-5 step through ladle.torch next to DistDL's (DISTDL_SRC=...)
#   make asan         the suite under AddressSanitizer + UBSan (= make check SANITIZE=1)
#   make check-tool-leaks  every tool's refusals on the tools built under ASan, leaks on
#   make valgrind     the suite's smaller runs under valgrind memcheck
#   make install PREFIX=/usr/local
#   make CUDA=1       the same with the CUDA backend (nvcc, cuBLAS), in build/cuda/
#   make CUDA=emu     the CUDA backend over its emulator (g++), in build/cudaemu/
#   make python       the libladle the Python package loads (Open MPI, as Debian's
#                     mpi4py), in build/python/; make check-python runs its pytest
#
# make check runs the suite on the CPU and the guarded test device, then,
# where the CUDA toolkit is found, builds the CUDA backend both ways: the
# emulated build runs the suite's CUDA programs and the layers' and
# primitives' tests on the emulated GPU, the real one checks what it can
# without a GPU (that a CUDA tensor is refused cleanly). CUDA_CHECK=0 skips
# that part. scripts/device-check.sh runs the CUDA tests on a real GPU.
#
# Any MPI-3 implementation works: make MPI=openmpi builds and runs with Open MPI
# (and installs Debian's packages for it when missing). make asan and make
# valgrind report ladle's own faults under either MPI: test/lsan.supp,
# test/valgrind-openmpi.supp and Open MPI's own valgrind file cover what MPI
# and its libraries keep (docs/testing.md says what and why), and a canary,
# test/canary.c, run first under the same wrapper, must be reported, or the
# run fails. make check never runs the canary.
#
# One build, one MPI: the compiler wrapper and the launcher are named as a pair
# (Debian's mpicc.mpich and mpiexec.mpich), never the bare mpicc and mpiexec,
# which follow whichever MPI was installed last (python3-torch pulls in Open
# MPI). MPICC and MPIEXEC may still be set by hand; the build records the pair
# it was made with and rebuilds everything when it changes.

# plain make builds the library and the tools (the rules below start with a stamp)
.DEFAULT_GOAL := all

MPI      ?= mpich
MPICC    ?= $(if $(shell command -v mpicc.$(MPI)),mpicc.$(MPI),mpicc)
MPIEXEC  ?= $(if $(shell command -v mpiexec.$(MPI)),mpiexec.$(MPI),mpiexec)
PREFIX   ?= /usr/local
SANITIZE ?= 0
DEPS     ?= 1
# -O1 under the sanitizers: ASan's own advice, and their build (make check's
# tool-leak pass compiles the whole library again) takes half the time
OPT      ?= $(if $(filter 1,$(SANITIZE)),-O1,-O3)
CUDA     ?= 0
# parallel jobs for the builds make check does itself
JOBS     ?= $(shell nproc 2>/dev/null || echo 2)
CUDA_HOME ?= /usr/local/cuda
NVCC     ?= $(or $(shell command -v nvcc),$(wildcard $(CUDA_HOME)/bin/nvcc))
# Hopper machine code, and PTX the driver compiles for any newer GPU
CUDA_ARCH ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
EMU_CXX  ?= g++

# the release (include/ladle/core.h) and the shared library's soname,
# libladle.so.ABI: ABI is MAJOR from 1.0 on, and MAJOR.MINOR before it, where a
# minor release may break the ABI (0.2 did; docs/embedding.md)
VERSION := $(shell sed -n 's/.*LADLE_VERSION_STRING "\(.*\)"/\1/p' include/ladle/core.h)
V_MAJOR := $(word 1,$(subst ., ,$(VERSION)))
V_MINOR := $(word 2,$(subst ., ,$(VERSION)))
ABI     := $(if $(filter 0,$(V_MAJOR)),$(V_MAJOR).$(V_MINOR),$(V_MAJOR))
SONAME  := libladle.so.$(ABI)

CC := $(MPICC)
# Open MPI needs leave to start more ranks than cores (make demo uses 4)
MPIEXEC_FLAGS ?= $(shell $(MPIEXEC) --version 2>&1 | grep -qiE "open ?(mpi|rte)" && echo --oversubscribe)
WARN := -Wall -Wextra -Werror -Wno-unused-parameter -Wvla -Wstrict-prototypes
CFLAGS_ALL := -std=c11 -D_POSIX_C_SOURCE=200809L $(WARN) $(OPT) -fno-trapping-math -g -fPIC \
              -fvisibility=hidden -Iinclude -I. $(CFLAGS)
LIBS := -lopenblas -lz -lm

ifeq ($(SANITIZE),1)
BUILD := build-asan
SAN := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
# the baseline copy of the cloned kernels (src/backends/cpu/simd.h): make check runs the machine's
CFLAGS_ALL += $(SAN) -DLADLE_NO_CLONES
LDSAN := $(SAN)
LIBDIR := $(BUILD)/lib
BINDIR := $(BUILD)/bin
# What the sanitized suite runs with (options the caller set come after ours
# and win):
#  - fast_unwind_on_malloc=0: Open MPI's libraries have no frame pointers, and
#    the frame-pointer unwinder stops at their first frame, which leaves a
#    leak's stack nothing that test/lsan.supp could recognise as Open MPI's
#  - test/lsan.supp: the leaks inside MPI and the libraries it loads
#  - HWLOC_COMPONENTS=-pci: hwloc's PCI plugin (libhwloc-plugins, which
#    python3-torch and Open MPI pull in) leaks while MPI_Init maps the
#    machine; test/lsan.supp covers it, but the runs need no PCI map
# The canary (test/canary.c) proves that ladle's own leaks and faults are
# still reported.
SAN_ENV := HWLOC_COMPONENTS=-pci ASAN_RUNTIME="$(shell $(CC) -print-file-name=libasan.so)" \
    ASAN_OPTIONS="fast_unwind_on_malloc=0$${ASAN_OPTIONS:+:$$ASAN_OPTIONS}" \
    LSAN_OPTIONS="suppressions=$(CURDIR)/test/lsan.supp:print_suppressions=0$${LSAN_OPTIONS:+:$$LSAN_OPTIONS}"
WITH_CANARY := 1
else ifneq ($(BUILD_DIR),)
# a separate plain build in a folder of its own (make python: build/python)
BUILD := $(BUILD_DIR)
LIBDIR := $(BUILD)/lib
BINDIR := $(BUILD)/bin
else
BUILD := build
LIBDIR := lib
BINDIR := bin
endif

# A CUDA build is a variant of the plain one: the C objects are the same
# ($(BUILD)/), the registry is compiled again knowing the CUDA backend, and
# the library, tools, tests and benchmarks are linked in $(OUT)/.
ifeq ($(CUDA),0)
OUT := $(BUILD)
else ifeq ($(CUDA),1)
OUT := $(BUILD)/cuda
ifeq ($(NVCC),)
$(error make CUDA=1 needs nvcc: none on PATH or in $(CUDA_HOME)/bin (set CUDA_HOME or NVCC))
endif
else ifeq ($(CUDA),emu)
OUT := $(BUILD)/cudaemu
else
$(error CUDA=$(CUDA): 0, 1 or emu)
endif
ifneq ($(CUDA),0)
LIBDIR := $(OUT)/lib
BINDIR := $(OUT)/bin
endif

# the library's folders, ground floor first (the floor plan: scripts/layering.sh)
SUBSYSTEMS := $(shell scripts/layering.sh --folders)
LIB_SRCS := $(wildcard $(addsuffix /*.c,$(SUBSYSTEMS)))
C_OBJS := $(patsubst %.c,$(BUILD)/%.o,$(LIB_SRCS))
CUDA_SRCS := $(wildcard src/backends/cuda/*.cu)
EMU_SRCS := $(wildcard src/backends/cuda/emu/*.cc)
ifeq ($(CUDA),0)
LIB_OBJS := $(C_OBJS)
else
# the registry built knowing the CUDA backend, and the backend
VARIANT_OBJS := $(OUT)/obj/src/core/backend.o $(patsubst %.cu,$(OUT)/obj/%.o,$(CUDA_SRCS)) \
                $(if $(filter emu,$(CUDA)),$(patsubst %.cc,$(OUT)/obj/%.o,$(EMU_SRCS)))
LIB_OBJS := $(filter-out $(BUILD)/src/core/backend.o,$(C_OBJS)) $(VARIANT_OBJS)
endif
ifeq ($(CUDA),1)
LIBS += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublas -lcudart -lstdc++
else ifeq ($(CUDA),emu)
LIBS += -lstdc++ -lpthread
endif
TOOLS := ladle-adjoint ladle-tour ladle-train ladle-bn-study ladle-pipe ladle-gpt
TOOL_BINS := $(addprefix $(BINDIR)/,$(TOOLS))
# the CUDA kernels' tests (test_cuda_*) are built where the backend is;
# test_cuda everywhere (without the backend, it checks the refusal)
TEST_SRCS := $(filter-out test/harness.c $(if $(filter 0,$(CUDA)),test/test_cuda_%),$(wildcard test/test_*.c))
TEST_BINS := $(patsubst test/%.c,$(OUT)/test/%,$(TEST_SRCS))
BENCH_BINS := $(OUT)/bench/bench_primitives $(OUT)/bench/bench_layers $(OUT)/bench/bench_dist \
              $(OUT)/bench/bench_pipe $(OUT)/bench/bench_overhead $(OUT)/bench/bench_gpt \
              $(OUT)/bench/bench_zero
# the GPU against cuBLAS, device copies, CPU tensors and PyTorch (scripts/device-check.sh)
# bench_gpu's baselines call cuBLAS directly (bench/gpu_raw.cu): a GPU build only
BENCH_BINS += $(if $(filter 1,$(CUDA)),$(OUT)/bench/bench_gpu)
EXAMPLE_BINS := $(patsubst examples/%.c,$(OUT)/examples/%,$(wildcard examples/*.c))

.PHONY: all deps demo tour check check-abi check-cuda check-tool-leaks python check-python check-torch layering api-lint asan valgrind bench bench-torch \
        bench-overhead bench-distdl install uninstall \
        clean format tests FORCE

# the MPI this build uses: its compile line and its launcher, and whether
# valgrind's memcheck.h is there (src/backends/cpu/memory.c announces its blocks
# to memcheck then); a change rebuilds all
MPI_ID := $(strip $(shell $(MPICC) -show 2>/dev/null) | $(shell command -v $(MPIEXEC)) | $(wildcard /usr/include/valgrind/memcheck.h))
$(BUILD)/mpi.stamp: FORCE
	@mkdir -p $(dir $@)
	@echo '$(MPI_ID)' | cmp -s - $@ 2>/dev/null || { echo '$(MPI_ID)' >$@; \
	    echo "ladle: building with $(MPICC) and $(MPIEXEC) ($$($(MPIEXEC) --version 2>&1 | \
	    grep -m1 -iE 'version:|open ?(mpi|rte)' | tr -s ' ' | \
	    sed -e 's/^ //' -e 's/^.*(OpenRTE)/Open MPI/'))"; }

all: $(LIBDIR)/libladle.a $(LIBDIR)/libladle.so $(TOOL_BINS) $(EXAMPLE_BINS)

# Debian's Open MPI packages, asked for only when it is the MPI in use
MPI_PACKAGES := $(if $(filter openmpi,$(MPI)),libopenmpi-dev openmpi-bin)

deps:
ifeq ($(DEPS),1)
	@scripts/install-deps.sh $(MPI_PACKAGES)
endif

# every object depends on every header and type-generic include (.inc)
LIB_HDRS := $(wildcard include/*.h include/ladle/*.h $(addsuffix /*.h,$(SUBSYSTEMS)) \
                       $(addsuffix /*.inc,$(SUBSYSTEMS)))
$(BUILD)/%.o: %.c $(LIB_HDRS) $(BUILD)/mpi.stamp
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -DLADLE_BUILDING -c $< -o $@

# The CUDA backend: its .cu files through nvcc, or through g++ over the
# emulator (src/backends/cuda/rt.h: one source for both); the registry
# again, knowing it. MPI's headers come from the wrapper's own compile line.
MPI_INC := $(filter -I%,$(shell $(MPICC) -show 2>/dev/null))
CUDA_DEFS := -DLADLE_BUILDING -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX -Iinclude -I. $(MPI_INC)
CUDA_HDRS := $(LIB_HDRS) $(wildcard src/backends/cuda/*.h src/backends/cuda/emu/*.h)
EMU_FLAGS := -std=c++20 $(WARN:-Wstrict-prototypes=) -O2 -g -fPIC -fvisibility=hidden \
             -ffp-contract=off -Wno-missing-field-initializers -DLADLE_CUDA_EMU $(CUDA_DEFS) $(SAN)
NVCC_FLAGS := -std=c++20 -O3 $(CUDA_ARCH) -Xcompiler -fPIC,-fvisibility=hidden,-Wall,-Wextra \
              -Xcompiler -Werror,-Wno-unused-parameter,-Wno-missing-field-initializers $(CUDA_DEFS)
$(OUT)/obj/src/core/backend.o: src/core/backend.c $(LIB_HDRS) $(BUILD)/mpi.stamp
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -DLADLE_WITH_CUDA -DLADLE_BUILDING -c $< -o $@
ifeq ($(CUDA),1)
$(OUT)/obj/%.o: %.cu $(CUDA_HDRS) $(BUILD)/mpi.stamp
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -c $< -o $@
else
$(OUT)/obj/%.o: %.cu $(CUDA_HDRS) $(BUILD)/mpi.stamp
	@mkdir -p $(dir $@)
	$(EMU_CXX) $(EMU_FLAGS) -x c++ -c $< -o $@
$(OUT)/obj/%.o: %.cc $(CUDA_HDRS) $(BUILD)/mpi.stamp
	@mkdir -p $(dir $@)
	$(EMU_CXX) $(EMU_FLAGS) -c $< -o $@
endif

# The layers' kernels may fuse multiply-adds (see src/backends/cpu/simd.h);
# the error-free sums of blas.c and the optimizers' updates may not.
CPU_FUSED := activation batchnorm conv conv_direct dropout loss norm pool pool_direct softmax
$(BUILD)/layers/%.o $(patsubst %,$(BUILD)/src/backends/cpu/%.o,$(CPU_FUSED)): \
    CFLAGS_ALL += -ffp-contract=fast
# The CPU kernels never read errno, so their math calls need not set it:
# with errno, a sqrt kept the optimizers' update loops scalar (their values
# are the same bits either way; docs/runs/2026-11-29-lenet-step-and-layer-kernels.md).
$(BUILD)/src/backends/cpu/%.o: CFLAGS_ALL += -fno-math-errno
# The channels' direct convolution (src/backends/cpu/conv_channels.inc)
# broadcasts each input from memory into its multiply-add; GCC's predictive
# commoning instead carried the inputs that neighbouring outputs share
# through the stack (its weight gradient of LeNet's conv2 ran 1.4 times slower).
$(BUILD)/src/backends/cpu/conv_direct.o: CFLAGS_ALL += -fno-predictive-commoning

$(LIBDIR)/libladle.a: $(LIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

# The shared library under its full versioned name, its soname
# libladle.so.ABI (what programs record) and the development link
# libladle.so; ABI changes when the ABI breaks (docs/embedding.md).
$(LIBDIR)/libladle.so.$(VERSION): $(LIB_OBJS)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,$(SONAME) $(LDSAN) -o $@ $^ $(LIBS)

$(LIBDIR)/libladle.so: $(LIBDIR)/libladle.so.$(VERSION)
	ln -sf libladle.so.$(VERSION) $(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $@

# The tools use the shared library (only its exported symbols), found at
# run time through RUNPATH $ORIGIN/../lib: bin/ next to lib/ in the build and
# under an install prefix alike, without LD_LIBRARY_PATH.
$(BINDIR)/%: tools/%.c $(wildcard tools/*.h) $(LIBDIR)/libladle.so
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $< -o $@ $(LDSAN) -L$(LIBDIR) -lladle \
	    -Wl,--enable-new-dtags,-rpath,'$$ORIGIN/../lib' $(LIBS)

# test objects are compiled once and linked into each variant's programs
# (kept: they are no intermediate files to be deleted after a link)
.SECONDARY: $(patsubst test/%.c,$(BUILD)/test/obj/%.o,$(wildcard test/*.c))
$(BUILD)/test/obj/%.o: test/%.c $(wildcard test/*.h) $(LIB_HDRS) $(BUILD)/mpi.stamp
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -c $< -o $@

# the harness: test/harness.c and its topics, test/harness_*.c
HARNESS_OBJS := $(patsubst test/%.c,$(BUILD)/test/obj/%.o,test/harness.c $(wildcard test/harness_*.c))
$(OUT)/test/%: $(BUILD)/test/obj/%.o $(HARNESS_OBJS) $(LIBDIR)/libladle.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $< $(HARNESS_OBJS) -o $@ $(LDSAN) $(LIBDIR)/libladle.a \
	    -lcheck_pic -lsubunit $(LIBS) -lpthread -lrt

# the sanitizer canary: built and run by make asan and make valgrind only
$(OUT)/test/canary: test/canary.c $(LIBDIR)/libladle.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $< -o $@ $(LDSAN) $(LIBDIR)/libladle.a $(LIBS)

$(OUT)/examples/%: examples/%.c $(LIBDIR)/libladle.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $< -o $@ $(LDSAN) $(LIBDIR)/libladle.a $(LIBS)

$(OUT)/bench/%: bench/%.c bench/common.h bench/shapes.h $(LIBDIR)/libladle.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $< -o $@ $(LDSAN) $(LIBDIR)/libladle.a $(LIBS)

$(OUT)/bench/bench_gpu: bench/bench_gpu.c bench/common.h bench/shapes.h bench/gpu_raw.h \
                        $(OUT)/obj/bench/gpu_raw.o $(LIBDIR)/libladle.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $< $(OUT)/obj/bench/gpu_raw.o -o $@ $(LDSAN) $(LIBDIR)/libladle.a $(LIBS)

# The public header must compile as C11 and as C++. (MPI's own deprecated C++
# bindings are skipped: Open MPI's do not compile cleanly under -Wextra.)
$(BUILD)/header-check.stamp: test/header_check.cpp include/ladle.h $(wildcard include/ladle/*.h)
	@mkdir -p $(dir $@)
	$(CC) -x c -std=c11 $(WARN) -Iinclude -fsyntax-only include/ladle.h
	$(CC) -x c++ -std=c++11 -Wall -Wextra -Werror -Iinclude -fsyntax-only \
	    -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX test/header_check.cpp
	@touch $@

# the canary goes with the tests only where it runs (make asan, make valgrind)
CANARY = $(if $(filter 1,$(WITH_CANARY)),$(OUT)/test/canary)
# the idle-yield shim that test/run.sh preloads into oversubscribed MPICH
# runs (test/idle_yield.c), itself not instrumented: under the sanitizers
# the run preloads ASan's runtime before it (ASAN_RUNTIME in SAN_ENV), since
# that runtime must come first among the libraries a program loads
IDLE_YIELD = $(OUT)/test/idle_yield.so
# the benchmarks are built with the tests: test/tool_errors.sh checks their options
tests: all $(TEST_BINS) $(BUILD)/header-check.stamp $(CANARY) $(IDLE_YIELD) \
       $(filter-out %/bench_gpu,$(BENCH_BINS)) $(OUT)/bench/cma_pull

$(OUT)/test/idle_yield.so: test/idle_yield.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -Wall -Wextra -Werror -shared -fPIC -Wl,--as-needed $< -o $@ -ldl

# make check runs the CUDA part after the plain build's suite (not under the
# sanitizers); CUDA_CHECK=0 skips it. The emulated build needs only g++, the
# nvcc build the toolkit, and runs only where one is found.
CUDA_CHECK ?= $(if $(and $(filter 0,$(CUDA)),$(filter 0,$(SANITIZE))),1,0)
# make check also runs every tool's refusals (test/tool_errors.sh) on the
# tools built under ASan + UBSan, leak checking on: a refusal that leaks or
# faults fails it (the plain build's run cannot see a leak).
# TOOL_LEAK_CHECK=0 skips it.
TOOL_LEAK_CHECK ?= $(if $(and $(filter 0,$(CUDA)),$(filter 0,$(SANITIZE)),$(filter build,$(BUILD))),1,0)

check: deps
	@$(MAKE) --no-print-directory -j$(JOBS) tests
	@status=0; \
	scripts/layering.sh $(BUILD) $(if $(VARIANT_OBJS),$(OUT)/obj) || status=1; \
	test/layering_test.sh || status=1; \
	scripts/api-lint.sh --strict || status=1; \
	test/api_lint_test.sh || status=1; \
	$(SAN_ENV) MPIEXEC="$(MPIEXEC)" BINDIR="$(BINDIR)" EXAMPLES="$(OUT)/examples" \
	    BENCHDIR="$(OUT)/bench" CANARY="$(CANARY)" TEST="$(TEST)" RANKS="$(RANKS)" \
	    test/run.sh $(OUT)/test || status=1; \
	if [ "$(SANITIZE)" = 0 ]; then $(MAKE) --no-print-directory check-abi || status=1; fi; \
	if [ "$(CUDA_CHECK)" = 1 ]; then $(MAKE) --no-print-directory check-cuda || status=1; fi; \
	if [ "$(TOOL_LEAK_CHECK)" = 1 ] && [ -z "$(TEST)" ]; then \
	    $(MAKE) --no-print-directory check-tool-leaks || status=1; fi; \
	if [ "$(PYTHON_CHECK)" = 1 ] && [ -z "$(TEST)" ]; then $(MAKE) --no-print-directory check-python \
	    PY_BUILD=$(PY_CHECK_BUILD) PY_OPT="$(PY_CHECK_OPT)" || status=1; fi; \
	exit $$status

# The C ABI as a user meets it (test/abi.sh): installed into a temporary
# prefix, the library's names and exported symbols, a tool run without
# LD_LIBRARY_PATH, programs built with pkg-config and CMake, a program of
# another MPI refused. (Not under the sanitizers: the consumers are plain.)
# The other MPI family's compiler wrapper is installed for that last row:
# on a clean machine nothing else has put it there yet when this runs (the
# Python part's Open MPI comes later), and the row would only be skipped.
ABI_OTHER_MPI := $(if $(filter openmpi,$(MPI)),mpich libmpich-dev,openmpi-bin libopenmpi-dev)
check-abi: all
	@echo "== the C ABI: an install, its users, another MPI"
	@if [ "$(DEPS)" = 1 ]; then scripts/install-deps.sh $(ABI_OTHER_MPI) >/dev/null 2>&1 || \
	    echo "(could not install $(ABI_OTHER_MPI): the other MPI's row is skipped)"; fi
	@tmp=$$(mktemp -d); \
	$(MAKE) --no-print-directory -s install PREFIX=$$tmp >$$tmp.log 2>&1 || \
	    { cat $$tmp.log; rm -rf $$tmp $$tmp.log; exit 1; }; \
	MPIEXEC="$(MPIEXEC)" test/abi.sh $$tmp $(LIBDIR); st=$$?; \
	rm -rf $$tmp $$tmp.log; exit $$st

# The CUDA backend without a GPU: over the emulator, the suite's CUDA runs
# (test/run.sh, DEVICES=cuda) and the emulated faults; built by nvcc, the
# refusal of a CUDA tensor where there is no GPU.
check-cuda:
	@echo "== the CUDA backend over its emulator (build/cudaemu)"
	@$(MAKE) --no-print-directory -j$(JOBS) CUDA=emu tests
	@status=0; \
	scripts/layering.sh $(BUILD) $(BUILD)/cudaemu/obj || status=1; \
	MPIEXEC="$(MPIEXEC)" BINDIR="$(BUILD)/cudaemu/bin" DEVICES=cuda TEST="$(TEST)" \
	    RANKS="$(RANKS)" TOOL_CUDA_DIRECT=1 test/run.sh $(BUILD)/cudaemu/test || status=1; \
	if [ -n "$(NVCC)" ]; then \
	    echo "== the CUDA backend built by nvcc (build/cuda)"; \
	    $(MAKE) --no-print-directory -j$(JOBS) CUDA=1 $(BUILD)/cuda/test/test_cuda \
	        $(BUILD)/cuda/bench/bench_gpu || status=1; \
	    MPIEXEC="$(MPIEXEC)" DEVICES=cpu TEST=test_cuda RANKS="1 2" \
	        test/run.sh $(BUILD)/cuda/test || status=1; \
	fi; \
	exit $$status

# The Python package (bindings/python) loads a libladle built against the MPI
# of Debian's python3-mpi4py, Open MPI: one process never holds two MPIs, and
# ladle's default build stays MPICH. It is a plain build of its own in
# build/python/ (BUILD_DIR), with Open MPI's pair of wrapper and launcher.
PY_BUILD := build/python
PYTHON3 ?= /usr/bin/python3
PYTHON_CHECK ?= $(if $(and $(filter 0,$(CUDA)),$(filter 0,$(SANITIZE)),$(filter build,$(BUILD))),1,0)
# (python3-torch for ladle.torch's tests, which skip without it)
PY_PACKAGES := python3-numpy python3-mpi4py python3-pytest python3-torch openmpi-bin libopenmpi-dev

# make check's Python pass builds a quick library of its own (-O1, the
# kernels' baseline copy only: a fifth of the compile time of the full build;
# the tests' tensors are tiny), so that it costs CI about a minute
PY_OPT ?= $(OPT)
PY_CHECK_BUILD := build/python-check
PY_CHECK_OPT := -O1 -DLADLE_NO_CLONES

python:
	@$(MAKE) --no-print-directory -j$(JOBS) MPI=openmpi MPICC=mpicc.openmpi MPIEXEC=mpiexec.openmpi BUILD_DIR=$(PY_BUILD) \
	    OPT="$(PY_OPT)" \
	    $(PY_BUILD)/lib/libladle.so

# pytest under Open MPI's launcher at 1 to 4 ranks (bindings/python/run-tests.sh);
# skipped, saying so, where the Python packages are missing and could not be
# installed
PYTEST_ARGS ?=
check-python:
	@if [ "$(DEPS)" = 1 ]; then scripts/install-deps.sh $(PY_PACKAGES) || true; fi; \
	if ! $(PYTHON3) -c "import numpy, mpi4py, pytest" 2>/dev/null || \
	    ! command -v mpiexec.openmpi >/dev/null || ! command -v mpicc.openmpi >/dev/null; then \
	    echo "== the Python package: SKIPPED (needs $(PY_PACKAGES);"; \
	    echo "   run scripts/install-deps.sh $(PY_PACKAGES) as root)"; exit 0; fi; \
	$(MAKE) --no-print-directory python || exit 1; \
	echo "== the Python package under Open MPI ($(PY_BUILD))"; \
	LADLE_LIBRARY="$(CURDIR)/$(PY_BUILD)/lib/libladle.so" \
	PYTHON3="$(PYTHON3)" MPIEXEC=mpiexec.openmpi RANKS="$(RANKS)" PYTEST_ARGS="$(PYTEST_ARGS)" \
	    $(if $(filter mpich,$(MPI)),LADLE_MPICH_LIBRARY="$(CURDIR)/$(LIBDIR)/libladle.so") \
	    bindings/python/run-tests.sh

# ladle.torch's tests alone
check-torch:
	@$(MAKE) --no-print-directory check-python \
	    PYTEST_ARGS="-k torch"

# dependencies run one way through the source tree (docs/architecture.md)
# the floor plan on this tree, then the check itself: it must catch an
# upward include planted in each floor (test/layering_test.sh)
layering: $(LIB_OBJS)
	@scripts/layering.sh $(BUILD) $(if $(VARIANT_OBJS),$(OUT)/obj)
	@test/layering_test.sh

# the public headers' habits (scripts/api-lint.sh): every prototype says
# whether it is collective, none takes more than 7 parameters, none is
# named _ex and no struct _opts (0.2 has none: make check runs --strict;
# API_LINT_FLAGS= only counts them). Then the check itself: it must catch
# what test/api_lint_test.sh plants
API_LINT_FLAGS ?= --strict
api-lint:
	@scripts/api-lint.sh $(API_LINT_FLAGS)
	@test/api_lint_test.sh

asan:
	@$(MAKE) --no-print-directory check SANITIZE=1

# The tools' refusals under the sanitizers (see TOOL_LEAK_CHECK): only the
# tools are built in build-asan/, not the suites.
check-tool-leaks:
ifeq ($(SANITIZE),1)
	@echo "== the tools' refusals under ASan + UBSan, leaks checked"
	@$(SAN_ENV) MPIEXEC="$(MPIEXEC)" BINDIR="$(BINDIR)" TEST=tool_errors test/run.sh $(OUT)/test
else
	@$(MAKE) --no-print-directory -j$(JOBS) SANITIZE=1 $(addprefix build-asan/bin/,$(TOOLS))
	@$(MAKE) --no-print-directory SANITIZE=1 check-tool-leaks
endif

# hwloc's PCI plugin is left out as in the sanitizer runs (no suppression
# here covers its leak); test/run.sh picks the suppression files for the MPI
# in use
valgrind:
ifeq ($(DEPS),1)
	@scripts/install-deps.sh valgrind $(MPI_PACKAGES)
endif
	@$(MAKE) --no-print-directory tests WITH_CANARY=1
	@HWLOC_COMPONENTS=-pci MPIEXEC="$(MPIEXEC)" BINDIR="$(BINDIR)" EXAMPLES="$(OUT)/examples" \
	    VALGRIND=1 CANARY="$(OUT)/test/canary" TEST="$(TEST)" RANKS="$(RANKS)" \
	    test/run.sh $(OUT)/test

# the main job: LeNet-5 with batch norm on Fashion-MNIST, 4 ranks, the batch
# split 2 ways, each image in 2 tiles, the linear layers 2 ways; one epoch
demo: deps
	@$(MAKE) --no-print-directory all
	OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 \
	    $(MPIEXEC) $(MPIEXEC_FLAGS) -n 4 $(BINDIR)/ladle-train --data-ways 2 --spatial 2x1 \
	    --fc-ways 2 --bn --epochs 1

# a tour of the primitives on 6 ranks, each with its adjoint mismatch
tour: deps
	@$(MAKE) --no-print-directory all
	OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 \
	    $(MPIEXEC) $(MPIEXEC_FLAGS) -n 6 $(BINDIR)/ladle-tour

bench: deps
	@$(MAKE) --no-print-directory all $(BENCH_BINS)
	@MPIEXEC="$(MPIEXEC)" bench/run.sh $(OUT)/bench | tee $(OUT)/bench/results.txt
	@echo "== medians over runs"
	@awk -f bench/summarize.awk $(OUT)/bench/results.txt

bench-torch: deps
	@$(MAKE) --no-print-directory $(OUT)/bench/bench_layers $(OUT)/bench/bench_dist
	@bench/torch_compare.sh $(OUT)/bench
	@MPIEXEC="$(MPIEXEC)" bench/torch_resnet.sh $(OUT)/bench
	@$(MAKE) --no-print-directory $(OUT)/bench/bench_gpt
	@MPIEXEC="$(MPIEXEC)" bench/gpt_compare.sh $(OUT)/bench

# a ladle call from PyTorch (ladle.torch) against the same call from C, both
# on the Open MPI build of make python (docs/benchmarks.md)
bench-overhead:
	@$(MAKE) --no-print-directory python
	@$(MAKE) --no-print-directory -j$(JOBS) MPI=openmpi MPICC=mpicc.openmpi MPIEXEC=mpiexec.openmpi \
	    BUILD_DIR=$(PY_BUILD) $(PY_BUILD)/bench/bench_overhead
	@OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
	    mpiexec.openmpi -n 1 $(PY_BUILD)/bench/bench_overhead | tee $(PY_BUILD)/bench/overhead-c.txt
	@OPENBLAS_NUM_THREADS=1 $(PYTHON3) bench/torch_overhead.py --c-output $(PY_BUILD)/bench/overhead-c.txt

# the LeNet-5 step through ladle.torch against DistDL's, at 2 and 4 ranks on
# Open MPI; DISTDL_SRC names DistDL's src folder (a checkout of its public code)
bench-distdl:
	@$(MAKE) --no-print-directory python
	@PYTHON3="$(PYTHON3)" bench/torch_vs_distdl.sh

# The MPI of this build as ladle_mpi_library() names it ("MPICH 4.0.2"),
# from LADLE_MPI_HEADER under the wrapper's mpi.h; its family and
# pkg-config module (recorded in ladle.pc and the CMake package).
MPI_LIBRARY = $(shell printf '\043include "ladle/partition.h"\nLADLE_MPI_HEADER\n' | \
    $(MPICC) -E -P -Iinclude -x c - 2>/dev/null | tail -1 | sed -e 's/" *"//g' -e 's/"//g')
MPI_FAMILY = $(if $(findstring Open MPI,$(MPI_LIBRARY)),Open MPI,$(if $(findstring MPICH,$(MPI_LIBRARY)),MPICH,$(firstword $(MPI_LIBRARY))))
MPI_PC = $(if $(findstring Open MPI,$(MPI_LIBRARY)),ompi-c,$(if $(findstring MPICH,$(MPI_LIBRARY)),mpich))
SUBST = sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' \
    -e 's|@MAJOR@|$(V_MAJOR)|g' -e 's|@MINOR@|$(V_MINOR)|g' -e 's|@SONAME@|$(SONAME)|g' \
    -e 's|@MPI_LIBRARY@|$(MPI_LIBRARY)|g' -e 's|@MPI_FAMILY@|$(MPI_FAMILY)|g' \
    -e 's|@MPI_PC@|$(shell pkg-config --exists $(MPI_PC) 2>/dev/null && echo $(MPI_PC))|g' \
    -e 's|@MPICC@|$(MPICC)|g' -e 's|@MPIEXEC@|$(MPIEXEC)|g' \
    -e 's|@MPICC_PATH@|$(shell command -v $(MPICC))|g' \
    -e 's|@MPIEXEC_PATH@|$(shell command -v $(MPIEXEC))|g'

# The library (libladle.so.X.Y.Z, its soname link and libladle.so), the
# headers, the tools (RUNPATH $ORIGIN/../lib finds the library), ladle.pc and
# the CMake package (lib/cmake/ladle).
install: all
	install -d $(DESTDIR)$(PREFIX)/include/ladle $(DESTDIR)$(PREFIX)/lib/pkgconfig \
	    $(DESTDIR)$(PREFIX)/lib/cmake/ladle $(DESTDIR)$(PREFIX)/bin
	install -m 644 include/ladle.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 include/ladle/*.h $(DESTDIR)$(PREFIX)/include/ladle/
	install -m 644 $(LIBDIR)/libladle.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(LIBDIR)/libladle.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libladle.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(PREFIX)/lib/libladle.so
	install -m 755 $(TOOL_BINS) $(DESTDIR)$(PREFIX)/bin/
	$(SUBST) ladle.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/ladle.pc
	$(SUBST) cmake/ladleConfig.cmake.in > $(DESTDIR)$(PREFIX)/lib/cmake/ladle/ladleConfig.cmake
	$(SUBST) cmake/ladleConfigVersion.cmake.in \
	    > $(DESTDIR)$(PREFIX)/lib/cmake/ladle/ladleConfigVersion.cmake

uninstall:
	rm -rf $(DESTDIR)$(PREFIX)/include/ladle $(DESTDIR)$(PREFIX)/include/ladle.h
	rm -f $(DESTDIR)$(PREFIX)/lib/libladle.* $(DESTDIR)$(PREFIX)/lib/pkgconfig/ladle.pc
	rm -rf $(DESTDIR)$(PREFIX)/lib/cmake/ladle
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/bin/,$(TOOLS))

format:
	clang-format -i include/*.h include/ladle/*.h $(wildcard $(addsuffix /*.[ch],$(SUBSYSTEMS))) \
	    tools/*.[ch] test/*.[ch] bench/*.[ch] examples/*.c

clean:
	rm -rf build build-asan lib bin
	rm -rf bindings/python/ladle/__pycache__ bindings/python/tests/__pycache__ \
	    bindings/python/.pytest_cache bindings/python/build bindings/python/ladle.egg-info
