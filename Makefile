# Makefile - builds libac and the aicraft Python extension, runs the tests and demos.
#
#   make            the Python extension, in place (aicraft/_libac*.so)
#   make lib        build/libac.a and build/libac.so
#   make test       install test requirements, build, C tests plain and under
#                   ASan+UBSan, the thread tests under TSan, the fuzz corpora
#                   replayed, then pytest
#   make tsan       the thread tests under ThreadSanitizer
#   make valgrind   the C tests under Valgrind's memcheck (non-sanitizer build)
#   make fuzz       each libFuzzer target for FUZZ_SECONDS (needs clang and
#                   libclang-rt-dev: apt-get install clang libclang-rt-14-dev)
#   make fuzz-python  atheris over the Python entry points for FUZZ_SECONDS
#   make fuzz-load  atheris over ac.load's nested structure for FUZZ_SECONDS
#   make demo       the main demo
#   make test-cuda  the CUDA tests (tests/cuda), then again under compute-sanitizer's
#                   memcheck; they skip without a GPU
#   make AC_CUDA=0  any target, built without the CUDA backend (the default builds it
#                   when nvcc is found: NVCC=path picks one)
#   make bench      the benchmarks (PyTorch columns need `pip install torch==2.13.0`)
#   make install PREFIX=/usr/local   header, libraries, aicraft.pc, aicraft-static.pc
#   make dist       sdist and wheel into dist/ (python -m build)
#   make dist-test  dist, then install each into a fresh venv and run a smoke test
#   make docs       the guides (docs/*.md) and the API reference (Sphinx, -W) into build/docs/html
#   make clean

PYTHON_SYS ?= python3
VENV       ?= .venv
PY         := $(VENV)/bin/python
PREFIX     ?= /usr/local
VERSION    := $(shell sed -n 's/^__version__ = "\([^"]*\)".*/\1/p' aicraft/__init__.py)

CC      ?= cc
CFLAGS  ?= -O3 -fno-math-errno
WARN    := -std=c99 -Wall -Wextra -pedantic
INC     := -Ilibac/include -Ilibac/src
LDLIBS  := -lm -lpthread
SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1

# CUDA: the .cu files under libac/src/kernels/cuda, compiled by nvcc for sm_90 with
# PTX for later GPUs, and cudart linked statically, so nothing needs a CUDA install
# to run. AC_HAVE_CUDA tells the C files; the fuzz build stays CPU-only.
NVCC      ?= $(shell command -v nvcc 2>/dev/null)
AC_CUDA   ?= $(if $(NVCC),1,0)
ifeq ($(AC_CUDA),1)
# where nvcc's own install is (its TOP), even when NVCC is a wrapper script
CUDA_HOME ?= $(realpath $(shell $(NVCC) --dryrun -c -x cu /dev/null -o /dev/null 2>&1 | sed -n 's/^\#\$$ TOP=//p'))
NVCCFLAGS := -O3 -std=c++20 -gencode arch=compute_90,code=[sm_90,compute_90] -Werror all-warnings \
             -Xcompiler -fPIC,-fno-exceptions,-fno-threadsafe-statics,-Wall,-Wextra,-Wno-missing-field-initializers
CU_SRC    := $(sort $(wildcard libac/src/kernels/cuda/*.cu))
CU_OBJ    := $(CU_SRC:libac/src/%.cu=build/cuda/%.o)
CUDA_DEF  := -DAC_HAVE_CUDA=1
# CUDA's static runtime is one object, archived into libac.a beside our own, so a C
# program links libac.a with -lm -lpthread alone, CUDA build or not.
CUDART    := build/cuda/cudart_static.o
endif

SRC       := $(sort $(wildcard libac/src/*.c libac/src/*/*.c libac/src/*/*/*.c))
OBJ       := $(SRC:libac/src/%.c=build/obj/%.o) $(CU_OBJ) $(CUDART)
ASAN_OBJ  := $(SRC:libac/src/%.c=build/asan/%.o) $(CU_OBJ) $(CUDART)
# build/cuda.flag holds AC_CUDA: switching it rebuilds everything.
HEADERS   := libac/include/ac.h $(wildcard libac/src/*.h libac/src/*/*.h libac/src/*/*/*.h) build/cuda.flag
CTESTS    := $(sort $(wildcard tests/c/test_*.c))
FUZZERS   := $(sort $(wildcard tests/fuzz/fuzz_*.c))
CDEMOS    := $(filter-out demos/c/mnist_mlp_mpi.c,$(sort $(wildcard demos/c/*.c)))
# The data-parallel C demo needs an MPI compiler: the mpich wheel's in the venv,
# else PATH's (looked up when used, so after `venv` has installed the wheel).
MPICC      = $(firstword $(wildcard $(VENV)/bin/mpicc) $(shell command -v mpicc))

.PHONY: FORCE test-cuda all lib test ctest asan tsan valgrind fuzz-replay fuzz fuzz-python fuzz-load pytest mpi-demo demo bench serve bench-serve install dist dist-test docs clean venv

all: venv
	AC_CUDA=$(AC_CUDA) NVCC=$(NVCC) $(PY) setup.py -q build_ext --inplace

venv: $(VENV)/.ready

$(VENV)/.ready: tests/requirements.txt
	test -x $(PY) || $(PYTHON_SYS) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r tests/requirements.txt
	touch $@

# ---- the C library -----------------------------------------------------------

lib: build/libac.a build/libac.so

build/cuda.flag: FORCE
	@mkdir -p build
	@echo $(AC_CUDA) | cmp -s - $@ || echo $(AC_CUDA) > $@

FORCE:

build/obj/%.o: libac/src/%.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(CFLAGS) $(CUDA_DEF) -fPIC $(INC) -c $< -o $@

build/cuda/%.o: libac/src/%.cu $(HEADERS)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) $(INC) -c $< -o $@

build/cuda/cudart_static.o: build/cuda.flag
	@mkdir -p $(dir $@)
	cd $(dir $@) && ar x $(CUDA_HOME)/lib64/libcudart_static.a cudart_static.o

build/libac.a: $(OBJ)
	rm -f $@
	ar rcs $@ $^

# Export exactly the functions the public header declares.
build/libac.map: libac/include/ac.h
	@mkdir -p build
	{ echo '{ global:'; grep -oE '\bac_[a-z0-9_]+ *\(' $< | tr -d ' (' | sort -u | sed 's/$$/;/'; \
	  echo 'local: *; };'; } > $@

build/libac.so: $(OBJ) build/libac.map
	$(CC) -shared -o $@ $(OBJ) -Wl,--version-script=build/libac.map $(LDLIBS)

# ---- tests -------------------------------------------------------------------

build/asan/%.o: libac/src/%.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(SAN) $(CUDA_DEF) $(INC) -c $< -o $@

build/asan/libac.a: $(ASAN_OBJ)
	rm -f $@
	ar rcs $@ $^

build/tests/%: tests/c/%.c tests/c/test.h build/libac.a
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(CFLAGS) $(INC) $< build/libac.a $(LDLIBS) -o $@

build/tests-asan/%: tests/c/%.c tests/c/test.h build/asan/libac.a
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(SAN) $(INC) $< build/asan/libac.a $(LDLIBS) -o $@

ctest: $(CTESTS:tests/c/%.c=build/tests/%)
	@set -e; for t in $^; do echo "== $$t"; $$t; done

asan: $(CTESTS:tests/c/%.c=build/tests-asan/%)
	@set -e; for t in $^; do echo "== $$t (asan+ubsan)"; \
	  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 $$t; done

# ThreadSanitizer over the tests that run libac from several threads at once
# (die_after_fork=0: test_threads checks that a forked child can use the pool).
TSAN       := -fsanitize=thread -fno-omit-frame-pointer -g -O1
TSAN_OBJ   := $(SRC:libac/src/%.c=build/tsan/%.o) $(CU_OBJ) $(CUDART)
TSAN_TESTS := test_threads test_train_threads

build/tsan/%.o: libac/src/%.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(TSAN) $(CUDA_DEF) $(INC) -c $< -o $@

build/tsan/libac.a: $(TSAN_OBJ)
	rm -f $@
	ar rcs $@ $^

build/tests-tsan/%: tests/c/%.c tests/c/test.h build/tsan/libac.a
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(TSAN) $(INC) $< build/tsan/libac.a $(LDLIBS) -o $@

tsan: $(TSAN_TESTS:%=build/tests-tsan/%)
	@set -e; for t in $^; do echo "== $$t (tsan)"; TSAN_OPTIONS="halt_on_error=1 die_after_fork=0" $$t; done

# Memcheck over the plain C tests: any invalid access or leak fails the run.
valgrind: $(CTESTS:tests/c/%.c=build/tests/%)
	@set -e; for t in $^; do echo "== $$t (valgrind)"; \
	  valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect \
	      --show-leak-kinds=definite,indirect --suppressions=tests/valgrind.supp $$t > /dev/null; done

# Each fuzz target run once on every input of its corpus, under gcc's ASan+UBSan.
build/tests-asan/%_replay: tests/fuzz/%.c tests/fuzz/fuzz.h tests/fuzz/replay.c build/asan/libac.a
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(SAN) $(INC) $< tests/fuzz/replay.c build/asan/libac.a $(LDLIBS) -o $@

fuzz-replay: $(FUZZERS:tests/fuzz/%.c=build/tests-asan/%_replay)
	@set -e; for t in $^; do name=$${t#build/tests-asan/fuzz_}; name=$${name%_replay}; \
	  ASAN_OPTIONS=detect_leaks=1 $$t tests/fuzz/corpus/$$name; done

# lib: tests/test_layers_c.py reads build/obj's symbols for libac's layers.
pytest: all lib mpi-demo
	$(PY) -m pytest -q tests

test: venv ctest asan tsan fuzz-replay pytest

# The GPU suite: every CUDA kernel against the CPU path, scopes, demos; then the
# same under compute-sanitizer's memcheck. Each test skips without a device.
COMPUTE_SANITIZER ?= $(firstword $(wildcard $(CUDA_HOME)/bin/compute-sanitizer) $(shell command -v compute-sanitizer 2>/dev/null))

test-cuda: all
	$(PY) -m pytest -q tests/cuda
	@if [ -n "$(COMPUTE_SANITIZER)" ] && $(PY) -c 'import aicraft, sys; sys.exit(not aicraft.cuda.is_available())'; then \
	  $(COMPUTE_SANITIZER) --tool memcheck --error-exitcode 1 --target-processes all $(PY) -m pytest -q tests/cuda; \
	else echo "compute-sanitizer memcheck skipped: no CUDA device or no compute-sanitizer"; fi

# ---- fuzzing -------------------------------------------------------------------

# libFuzzer with clang's ASan+UBSan. Each target starts from its corpus in
# tests/fuzz/corpus/NAME; what it finds new goes to build/fuzz/corpus-NAME, a
# crashing input to build/fuzz/crash-NAME-* (copy it into the corpus, once fixed,
# as a regression input).
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 600
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1
FUZZ_OBJ     := $(SRC:libac/src/%.c=build/fuzz/obj/%.o)

build/fuzz/obj/%.o: libac/src/%.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(WARN) $(FUZZ_SAN) -fsanitize=fuzzer-no-link $(INC) -c $< -o $@

build/fuzz/libac.a: $(FUZZ_OBJ)
	rm -f $@
	ar rcs $@ $^

build/fuzz/%: tests/fuzz/%.c tests/fuzz/fuzz.h build/fuzz/libac.a
	$(FUZZ_CC) $(WARN) $(FUZZ_SAN) -fsanitize=fuzzer $(INC) $< build/fuzz/libac.a $(LDLIBS) -o $@

fuzz: $(FUZZERS:tests/fuzz/%.c=build/fuzz/%)
	@set -e; for t in $^; do name=$${t#build/fuzz/fuzz_}; mkdir -p build/fuzz/corpus-$$name; \
	  echo "== $$t for $(FUZZ_SECONDS) s"; \
	  $$t -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	      -artifact_prefix=build/fuzz/crash-$$name- build/fuzz/corpus-$$name tests/fuzz/corpus/$$name; \
	done

fuzz-python: all
	$(PY) -m pip install -q --disable-pip-version-check atheris
	@mkdir -p build/fuzz/corpus-python
	PYTHONPATH=. $(PY) tests/fuzz/fuzz_python.py -max_total_time=$(FUZZ_SECONDS) -timeout=30 \
	    -print_final_stats=1 -artifact_prefix=build/fuzz/crash-python- build/fuzz/corpus-python

# atheris over ac.load's nested structure (tests/fuzz/fuzz_load.py); its corpus is
# replayed by pytest (tests/test_fuzz_load_corpus.py)
fuzz-load: all
	$(PY) -m pip install -q --disable-pip-version-check atheris
	@mkdir -p build/fuzz/corpus-load
	PYTHONPATH=. $(PY) tests/fuzz/fuzz_load.py -max_total_time=$(FUZZ_SECONDS) -timeout=30 \
	    -print_final_stats=1 -artifact_prefix=build/fuzz/crash-load- build/fuzz/corpus-load tests/fuzz/corpus/load

# ---- demos, benchmarks, install ---------------------------------------------

build/demos/%: demos/c/%.c demos/c/mnist.h build/libac.a
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(CFLAGS) -Ilibac/include $< build/libac.a $(LDLIBS) -o $@

# C programs that time libac with no Python (bench/*.c)
build/bench/%: bench/%.c build/libac.a
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(CFLAGS) -Ilibac/include $< build/libac.a $(LDLIBS) -o $@

build/demos/mnist_mlp_mpi: demos/c/mnist_mlp_mpi.c demos/c/mnist.h build/libac.a
	@mkdir -p $(dir $@)
	$(MPICC) $(WARN) $(CFLAGS) -Ilibac/include $< build/libac.a $(LDLIBS) -o $@

# Built only where an mpicc is found (tests/test_distributed.py runs it when built).
mpi-demo: venv
	@if [ -n "$(MPICC)" ]; then $(MAKE) --no-print-directory build/demos/mnist_mlp_mpi; \
	else echo "no mpicc found: demos/c/mnist_mlp_mpi.c not built"; fi

# The MNIST MLP in Python (fetches MNIST into data/ on first use), the same model
# trained in C, then C predicting with the weights Python saved.
demo: all $(CDEMOS:demos/c/%.c=build/demos/%)
	$(PY) demos/mnist_mlp.py
	build/demos/mnist_mlp
	build/demos/predict

bench: all build/bench/replay_step
	$(PY) bench/overhead.py
	$(PY) bench/gemm.py
	$(PY) bench/mlp.py
	$(PY) bench/elementwise.py
	$(PY) bench/lstm.py
	$(PY) bench/cnn.py
	$(PY) bench/quant.py
	$(PY) bench/packed_fusion.py
	$(PY) bench/ddp.py
	build/bench/replay_step

# The MNIST MLP as a WSGI service: 2 workers, 4 threads each, the model loaded
# before the fork. Train it first with `make demo` (or point AICRAFT_WEIGHTS elsewhere).
AICRAFT_WEIGHTS ?= data/mnist_mlp.safetensors

serve: all
	AICRAFT_WEIGHTS=$(AICRAFT_WEIGHTS) AC_NUM_THREADS=1 $(VENV)/bin/gunicorn -c demos/gunicorn_conf.py --no-control-socket \
	    --preload -w 2 --threads 4 -b 127.0.0.1:8000 demos.serve:app

# Load test against the same service on PyTorch (needs wrk, curl, torch): about 6 minutes.
bench-serve: all
	bench/serve_load.sh

install: lib
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 644 libac/include/ac.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 build/libac.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 build/libac.so $(DESTDIR)$(PREFIX)/lib/
	for pc in aicraft aicraft-static; do \
	  sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' $$pc.pc.in \
	    > $(DESTDIR)$(PREFIX)/lib/pkgconfig/$$pc.pc; done

# Packaging is checked here, not in `make test`: building and installing twice
# into fresh venvs takes minutes. --no-isolation builds with this venv's setuptools
# and cffi; the smoke test's venvs fetch numpy and cffi from the index.
dist: venv
	$(PY) -m pip install -q --disable-pip-version-check build
	rm -rf dist
	$(PY) -m build --no-isolation --outdir dist .

dist-test: dist
	$(PY) tests/packaging/check_dist.py dist

# The API reference: Sphinx, whose autodoc imports the package and so documents the
# methods and functions aicraft builds in loops too. -W: a warning fails the build.
docs: all
	$(PY) -m pip install -q --disable-pip-version-check sphinx myst-parser
	$(PY) -m sphinx -W -q -b html docs build/docs/html

clean:
	rm -rf build dist aicraft/_libac*.so aicraft/_libac.c aicraft/_libac.o aicraft/include aicraft/lib \
	  *.egg-info .pytest_cache
