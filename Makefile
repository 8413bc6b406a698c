# kvverify — plain Makefile (STYLE habit 9).
#
#   make                 build ./kvverify (into $(O), default build/)
#   make test            unit, integration, CLI and fuzz-corpus tests
#   make test-asan       the same under AddressSanitizer + UBSan
#   make test-slow       exhaustive sweeps (portable math over all fp32 inputs)
#   make fuzz            build the libFuzzer targets (clang) and run each briefly
#   make fuzz-measure    the long fuzzing measurement of docs/fuzzing.md
#   make bench           throughput table (bench/run.sh)
#   make vectors-update  regenerate vectors/golden/
#   make clean
#
# Variables: CC, O (build folder), OPT (optimisation), SAN (sanitizer flags).
# The reference build never uses -ffast-math, -Ofast or -march=native;
# -ffp-contract=off keeps the compiler from fusing a*b+c behind our back.

CC      ?= cc
O       ?= build
OPT     ?= -O2 -g
SAN     ?=
WERROR  ?=
WARN     = -Wall -Wextra -Wshadow -Wstrict-prototypes -Wvla -Wformat=2 $(WERROR)
CFLAGS   = -std=c11 $(WARN) $(OPT) $(SAN) -ffp-contract=off -fno-math-errno \
           -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -I. -MMD -MP
LDFLAGS += $(SAN)
LIBS     = -lopenblas -lmpfr -lgmp -lz -lnettle -ljansson -lpcre2-8 -lutf8proc -lpthread -lm
TESTLIBS = -lcmocka

# Per-ISA kernels of the cpu engine are compiled with their ISA flags and
# picked at run time from cpuid; everything else is portable x86-64/aarch64.
ISA_avx2    = -mavx2 -mfma -mf16c
ISA_avx512  = -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -mf16c

MODEL_SRC    := $(wildcard model/*.c)
RUNTIME_SRC  := $(wildcard runtime/*.c)
REF_SRC      := $(wildcard reference/*.c)
ENGINE_SRC   := $(wildcard engine/*.c engine/*/*.c)
VECTORS_SRC  := $(wildcard vectors/*.c)
VERIFY_SRC   := $(wildcard verify/*.c verify/*/*.c)
CLI_SRC      := $(wildcard cli/*.c)

obj = $(patsubst %.c,$(O)/%.o,$(1))

# One archive per layer; a test links only the layers at and below its own.
L_MODEL   := $(O)/libkvv_model.a
L_RUNTIME := $(O)/libkvv_runtime.a
L_REF     := $(O)/libkvv_reference.a
L_ENGINE  := $(O)/libkvv_engine.a
L_VECTORS := $(O)/libkvv_vectors.a
L_VERIFY  := $(O)/libkvv_verify.a
L_CLI     := $(O)/libkvv_cli.a

LAYERS_model     := $(L_MODEL)
LAYERS_runtime   := $(L_RUNTIME) $(L_MODEL)
LAYERS_reference := $(L_REF) $(L_RUNTIME) $(L_MODEL)
LAYERS_engine    := $(L_ENGINE) $(L_REF) $(L_RUNTIME) $(L_MODEL)
LAYERS_vectors   := $(L_VERIFY) $(L_VECTORS) $(L_ENGINE) $(L_REF) $(L_RUNTIME) $(L_MODEL)
LAYERS_verify    := $(L_VERIFY) $(L_VECTORS) $(L_ENGINE) $(L_REF) $(L_RUNTIME) $(L_MODEL)
LAYERS_all       := $(LAYERS_verify)

BIN := $(O)/kvverify

TEST_SRC := $(wildcard tests/model/test_*.c tests/runtime/test_*.c tests/reference/test_*.c tests/engine/test_*.c \
                       tests/vectors/test_*.c tests/verify/test_*.c)
TEST_BIN := $(patsubst %.c,$(O)/%,$(TEST_SRC))
TEST_UTIL := $(O)/tests/test_util.o

.PHONY: all kvverify test test-asan test-slow fuzz fuzz-build fuzz-one fuzz-measure bench vectors-update clean
all: $(BIN) kvverify

# Always re-pointed: `make test-asan` points it at the ASan build, and the
# next plain `make` must point it back.
kvverify: $(BIN)
	ln -sfn $(BIN) kvverify

$(O)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(if $(findstring _avx512,$<),$(ISA_avx512),$(if $(findstring _avx2,$<),$(ISA_avx2))) -c $< -o $@

$(L_MODEL):   $(call obj,$(MODEL_SRC))
$(L_RUNTIME): $(call obj,$(RUNTIME_SRC))
$(L_REF):     $(call obj,$(REF_SRC))
$(L_ENGINE):  $(call obj,$(ENGINE_SRC))
$(L_VECTORS): $(call obj,$(VECTORS_SRC))
$(L_VERIFY):  $(call obj,$(VERIFY_SRC))
$(L_CLI):     $(call obj,$(filter-out cli/main.c,$(CLI_SRC)))
$(O)/libkvv_%.a:
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^ $(if $^,,$(O)/empty.o)

$(O)/empty.o:
	@mkdir -p $(O) && echo 'typedef int kvv_empty_unit;' > $(O)/empty.c && $(CC) -c $(O)/empty.c -o $@
$(L_MODEL) $(L_RUNTIME) $(L_REF) $(L_ENGINE) $(L_VECTORS) $(L_VERIFY) $(L_CLI): | $(O)/empty.o

$(BIN): $(call obj,$(CLI_SRC)) $(LAYERS_all)
	$(CC) $(LDFLAGS) -o $@ $(call obj,$(CLI_SRC)) $(LAYERS_all) $(LIBS)

# tests/<layer>/test_x.c links the layers at and below <layer>.
define test_rule
$(O)/tests/$(1)/%: tests/$(1)/%.c $(TEST_UTIL) $$(LAYERS_$(1))
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CFLAGS) $$(LDFLAGS) -o $$@ $$< $(TEST_UTIL) $$(LAYERS_$(1)) $$(LIBS) $$(TESTLIBS)
endef
$(foreach l,model runtime reference engine vectors verify,$(eval $(call test_rule,$(l))))

# Fuzz targets: tests/fuzz/fuzz_*.c define LLVMFuzzerTestOneInput. The plain
# replay driver runs a corpus without libFuzzer, inside `make test`
# (fuzz_opts also links the command objects, all but main.o: $(L_CLI)).
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_REPLAY := $(patsubst tests/fuzz/%.c,$(O)/tests/fuzz/replay_%,$(FUZZ_SRC))
$(O)/tests/fuzz/replay_%: tests/fuzz/%.c tests/fuzz/replay.c $(L_CLI) $(LAYERS_all)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< tests/fuzz/replay.c $(L_CLI) $(LAYERS_all) $(LIBS)

test: $(BIN) kvverify $(TEST_BIN) $(FUZZ_REPLAY)
	@O=$(O) sh tests/run_tests.sh

test-asan:
	$(MAKE) O=build-asan OPT="-O1 -g -fno-omit-frame-pointer" \
	  SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined" test

test-slow: $(BIN) $(TEST_BIN)
	@O=$(O) KVV_SLOW=1 sh tests/run_tests.sh

FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_SAN := -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
# Layers each fuzz target links (default: all); building only those keeps a
# target usable while an unrelated layer does not compile with clang.
FUZZ_LAYERS_fuzz_gguf := model
FUZZ_LAYERS_fuzz_kvv  := vectors model
FUZZ_LAYERS_fuzz_tokenizer := model
FUZZ_LAYERS_fuzz_vocab := model
FUZZ_LAYERS_fuzz_opts := cli verify vectors engine reference runtime model
FUZZ_NAMES := $(basename $(notdir $(FUZZ_SRC)))
FUZZ_LIBS = $(foreach l,$(or $(FUZZ_LAYERS_$(FUZZ_TARGET)),verify vectors engine reference runtime model),build-fuzz/libkvv_$(l).a)
fuzz:
	@set -e; for n in $(FUZZ_NAMES); do $(MAKE) --no-print-directory fuzz-one FUZZ_TARGET=$$n; done

# The long measurement (docs/fuzzing.md): each target until 10 million
# executions or FUZZ_MEASURE_SECONDS (default 3600), ASan+UBSan, on
# FUZZ_JOBS cores; rows of the results table go to build-fuzz/results.md.
fuzz-measure:
	sh tests/fuzz/measure.sh

# One target: FUZZ_TARGET=fuzz_gguf. New inputs go to build-fuzz/corpus-NAME.
fuzz-build:
	$(MAKE) --no-print-directory O=build-fuzz CC=$(FUZZ_CC) OPT="-O1 -g" SAN="$(FUZZ_SAN)" $(FUZZ_LIBS)
	$(FUZZ_CC) -std=c11 -I. -O1 -g -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -fsanitize=fuzzer,address,undefined \
	  -fno-sanitize-recover=undefined -o build-fuzz/$(FUZZ_TARGET) tests/fuzz/$(FUZZ_TARGET).c $(FUZZ_LIBS) $(LIBS)

fuzz-one: fuzz-build
	mkdir -p build-fuzz/corpus-$(FUZZ_TARGET)
	./build-fuzz/$(FUZZ_TARGET) -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	  build-fuzz/corpus-$(FUZZ_TARGET) tests/fuzz/corpus/$(FUZZ_TARGET:fuzz_%=%)

bench: $(BIN)
	sh bench/run.sh

vectors-update: $(BIN)
	sh vectors/update.sh

clean:
	rm -rf build build-* kvverify

-include $(shell find $(O) -name '*.d' 2>/dev/null)
