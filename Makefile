# kvverify — plain Makefile (STYLE habit 9).
#
#   make                 build ./kvverify (into $(O), default build/)
#   make test            unit, integration, CLI and fuzz-corpus tests
#   make test-asan       the same under AddressSanitizer + UBSan
#   make test-slow       exhaustive sweeps (portable math over all fp32 inputs)
#   make fuzz            build the libFuzzer targets (clang) and run each briefly
#   make fuzz-measure    the long fuzzing measurement of docs/fuzzing.md
#   make bench           throughput table (bench/run.sh), evict wall time (bench/evict.sh),
#                        audit memory (bench/memory.sh)
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
LIBS     = -lcurl -lopenblas -lmpfr -lgmp -lz -lnettle -ljansson -lpcre2-8 -lutf8proc -lpthread -ldl -lm
TESTLIBS = -lcmocka

# Per-ISA kernels of the cpu engine are compiled with their ISA flags and
# picked at run time from cpuid; everything else is portable x86-64/aarch64.
ISA_avx2    = -mavx2 -mfma -mf16c
ISA_avx512  = -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -mf16c
# *_avx512vnni.c: reached only after a cpuid check for VNNI (cpu_q4x16.h)
ISA_vnni    = -mavx512vnni

COMMON_SRC   := $(wildcard common/*.c)
MODEL_SRC    := $(wildcard model/*.c)
RUNTIME_SRC  := $(wildcard runtime/*.c)
REF_SRC      := $(wildcard reference/*.c)
ENGINE_SRC   := $(wildcard engine/*.c engine/*/*.c)
VECTORS_SRC  := $(wildcard vectors/*.c)
VERIFY_SRC   := $(wildcard verify/*.c verify/*/*.c)
CLI_SRC      := $(wildcard cli/*.c)

obj = $(patsubst %.c,$(O)/%.o,$(1))

# One archive per layer; a test links only the layers at and below its own.
L_COMMON  := $(O)/libkvv_common.a
L_MODEL   := $(O)/libkvv_model.a
L_RUNTIME := $(O)/libkvv_runtime.a
L_REF     := $(O)/libkvv_reference.a
L_ENGINE  := $(O)/libkvv_engine.a
L_VECTORS := $(O)/libkvv_vectors.a
L_VERIFY  := $(O)/libkvv_verify.a
L_CLI     := $(O)/libkvv_cli.a

LAYERS_common    := $(L_COMMON)
LAYERS_model     := $(L_MODEL) $(L_COMMON)
LAYERS_runtime   := $(L_RUNTIME) $(L_MODEL) $(L_COMMON)
LAYERS_reference := $(L_REF) $(L_RUNTIME) $(L_MODEL) $(L_COMMON)
LAYERS_engine    := $(L_ENGINE) $(L_REF) $(L_RUNTIME) $(L_MODEL) $(L_COMMON)
LAYERS_vectors   := $(L_VECTORS) $(L_ENGINE) $(L_REF) $(L_RUNTIME) $(L_MODEL) $(L_COMMON)
LAYERS_verify    := $(L_VERIFY) $(L_VECTORS) $(L_ENGINE) $(L_REF) $(L_RUNTIME) $(L_MODEL) $(L_COMMON)
LAYERS_all       := $(LAYERS_verify)

BIN := $(O)/kvverify

TEST_SRC := $(wildcard tests/common/test_*.c tests/model/test_*.c tests/runtime/test_*.c tests/reference/test_*.c tests/engine/test_*.c \
                       tests/vectors/test_*.c tests/verify/test_*.c)
TEST_BIN := $(patsubst %.c,$(O)/%,$(TEST_SRC))
TEST_UTIL := $(O)/tests/test_util.o

.PHONY: all kvverify plugins test test-asan test-slow fuzz fuzz-build fuzz-one fuzz-measure bench vectors-update clean
all: $(BIN) kvverify plugins

# Always re-pointed: `make test-asan` points it at the ASan build, and the
# next plain `make` must point it back.
kvverify: $(BIN)
	ln -sfn $(BIN) kvverify

$(O)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(if $(findstring _avx512,$<),$(ISA_avx512),$(if $(findstring _avx2,$<),$(ISA_avx2))) $(if $(findstring _avx512vnni,$<),$(ISA_vnni)) -c $< -o $@

$(L_COMMON):  $(call obj,$(COMMON_SRC))
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
$(L_COMMON) $(L_MODEL) $(L_RUNTIME) $(L_REF) $(L_ENGINE) $(L_VECTORS) $(L_VERIFY) $(L_CLI): | $(O)/empty.o

$(BIN): $(call obj,$(CLI_SRC)) $(LAYERS_all)
	$(CC) $(LDFLAGS) -o $@ $(call obj,$(CLI_SRC)) $(LAYERS_all) $(LIBS)

# Plugins (include/kvverify/engine_plugin.h): shared objects that talk to
# the host only through that header, each exporting one symbol
# (plugins/plugin.map hides everything else, so what a plugin links cannot
# clash with the host's own copy). The example plugin's implementation is
# the reference engine: the common, model, runtime and reference layers compiled a second
# time with -fPIC into $(O)/pic/ (the layer archives are position-dependent,
# and stay so), same flags otherwise, so the bits are the reference's.
PIC_OBJ = $(patsubst %.c,$(O)/pic/%.o,$(1))
PLUGIN_CFLAGS = -fPIC -Iinclude
PLUGIN_LDFLAGS = -shared -Wl,--version-script=plugins/plugin.map $(if $(SAN),,-Wl,-z,defs)
$(O)/pic/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PLUGIN_CFLAGS) -c $< -o $@

PIC_COMMON  := $(O)/pic/libkvv_common.a
PIC_MODEL   := $(O)/pic/libkvv_model.a
PIC_RUNTIME := $(O)/pic/libkvv_runtime.a
PIC_REF     := $(O)/pic/libkvv_reference.a
$(PIC_COMMON):  $(call PIC_OBJ,$(COMMON_SRC))
$(PIC_MODEL):   $(call PIC_OBJ,$(MODEL_SRC))
$(PIC_RUNTIME): $(call PIC_OBJ,$(RUNTIME_SRC))
$(PIC_REF):     $(call PIC_OBJ,$(REF_SRC))
$(PIC_COMMON) $(PIC_MODEL) $(PIC_RUNTIME) $(PIC_REF):
	rm -f $@ && ar rcs $@ $^

PLUGIN_EXAMPLE := $(O)/plugins/example.so
PLUGINS := $(PLUGIN_EXAMPLE) $(O)/plugins/llama.cpp.so
plugins: $(PLUGINS)
$(PLUGIN_EXAMPLE): $(call PIC_OBJ,$(wildcard plugins/example/*.c)) $(PIC_REF) $(PIC_RUNTIME) $(PIC_MODEL) $(PIC_COMMON) plugins/plugin.map
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $(PLUGIN_LDFLAGS) -o $@ $(filter %.o %.a,$^) $(LIBS)

# The llama.cpp plugin: built against llama.cpp's headers only; it dlopens
# the prebuilt libraries at run time (plugins/llama.cpp/llama_lib.h). Both
# come from deps/llama.cpp/ (scripts/install-deps.sh). -z nodelete: ggml
# keeps pointers into the plugin (its log callback) for the process's life.
LLAMA_DIR := deps/llama.cpp
LLAMA_PLUGIN_SRC := $(wildcard plugins/llama.cpp/*.c)
$(O)/pic/plugins/llama.cpp/%.o: plugins/llama.cpp/%.c $(LLAMA_DIR)/include/llama.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PLUGIN_CFLAGS) -isystem $(LLAMA_DIR)/include -isystem $(LLAMA_DIR)/ggml/include \
	  -DKVV_LLAMA_CPP_DIR='"$(abspath $(LLAMA_DIR))"' -c $< -o $@
$(O)/plugins/llama.cpp.so: $(call PIC_OBJ,$(LLAMA_PLUGIN_SRC)) plugins/plugin.map
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $(PLUGIN_LDFLAGS) -Wl,-z,nodelete -o $@ $(filter %.o,$^) -ldl -lpthread
$(LLAMA_DIR)/include/llama.h:
	@echo "$(LLAMA_DIR) is missing: run scripts/install-deps.sh (it fetches llama.cpp's npm packages)" >&2
	@exit 1

# Plugins that break the ABI on purpose (tests/engine/plugin_bad.c).
TEST_PLUGINS := $(foreach k,abi slot dims null nosym v10 seqs old,$(O)/tests/plugins/bad_$(k).so)
$(O)/tests/plugins/bad_%.so: tests/engine/plugin_bad.c include/kvverify/engine_plugin.h plugins/plugin.map
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PLUGIN_CFLAGS) -DBAD_$* $(LDFLAGS) $(PLUGIN_LDFLAGS) -o $@ $<

# tests/<layer>/test_x.c links the layers at and below <layer>.
define test_rule
$(O)/tests/$(1)/%: tests/$(1)/%.c $(TEST_UTIL) $$(LAYERS_$(1))
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CFLAGS) $$(LDFLAGS) -o $$@ $$< $(TEST_UTIL) $$(LAYERS_$(1)) $$(LIBS) $$(TESTLIBS)
endef
$(foreach l,common model runtime reference engine vectors verify,$(eval $(call test_rule,$(l))))
# The writer's test sees (and fails) each fsync through a wrapper.
$(O)/tests/common/test_atomic_writer: LDFLAGS += -Wl,--wrap=fsync

# Test-only: the x86 kernel files compiled again without their -m flags,
# against SIMDe (tests/engine/simde_x86.h), so test_cpu_kernels checks every
# kernel table on any x86 CPU, natively where it can and emulated always.
# The planted build swaps two lanes of the AVX-512 reduction tree
# (KVV_CPU_PLANT_HSUM_SWAP); tests/cli/test_kernel_plant.sh expects the
# kernel test linked with it to fail. ./kvverify never links either.
EMU_SRC   := $(wildcard engine/cpu/*_avx2.c engine/cpu/*_avx512.c engine/cpu/*_avx512vnni.c)
EMU_OBJ   := $(patsubst %.c,$(O)/emu/%.o,$(EMU_SRC))
PLANT_OBJ := $(filter-out $(O)/emu/engine/cpu/cpu_kernels_avx512.o,$(EMU_OBJ)) \
             $(O)/emu-plant/engine/cpu/cpu_kernels_avx512.o
# -Wno-psabi: clang notes that vector arguments pass differently without
# the -m flags; every function taking one is static to its file.
# -O0 last: SIMDe's portable AVX-512 bodies take minutes of CPU each to
# optimise (cpu_kquant_avx512.c: ~150 s at -O1, ~3 s at -O0) and the
# emulated tests run in under a second either way.
EMU_FLAGS  = -DKVV_CPU_EMULATED -include tests/engine/simde_x86.h -Wno-psabi -O0
$(O)/emu/%.o: %.c tests/engine/simde_x86.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(EMU_FLAGS) -c $< -o $@
$(O)/emu-plant/%.o: %.c tests/engine/simde_x86.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(EMU_FLAGS) -DKVV_CPU_PLANT_HSUM_SWAP -c $< -o $@
$(O)/tests/engine/test_cpu_kernels: tests/engine/test_cpu_kernels.c $(TEST_UTIL) $(EMU_OBJ) $(LAYERS_engine)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(EMU_OBJ) $(TEST_UTIL) $(LAYERS_engine) $(LIBS) $(TESTLIBS)
PLANT_BIN := $(O)/tests/plant/cpu_kernels_hsum_swap
$(PLANT_BIN): tests/engine/test_cpu_kernels.c $(TEST_UTIL) $(PLANT_OBJ) $(LAYERS_engine)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(PLANT_OBJ) $(TEST_UTIL) $(LAYERS_engine) $(LIBS) $(TESTLIBS)
# K10 (cpu_kquant.h): the same for the K-quant products, and a planted AVX2
# build whose two float steps per super-block run in the other order
# (KVV_CPU_PLANT_KQ_ORDER), which test_kernel_plant.sh expects to fail.
$(O)/tests/engine/test_cpu_kquant_kernels $(O)/tests/engine/test_cpu_x16: $(O)/tests/engine/%: tests/engine/%.c $(TEST_UTIL) $(EMU_OBJ) $(LAYERS_engine)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(EMU_OBJ) $(TEST_UTIL) $(LAYERS_engine) $(LIBS) $(TESTLIBS)
PLANT_KQ_OBJ := $(filter-out $(O)/emu/engine/cpu/cpu_kquant_avx2.o,$(EMU_OBJ)) \
                $(O)/emu-plant-kq/engine/cpu/cpu_kquant_avx2.o
$(O)/emu-plant-kq/%.o: %.c tests/engine/simde_x86.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(EMU_FLAGS) -DKVV_CPU_PLANT_KQ_ORDER -c $< -o $@
PLANT_KQ_BIN := $(O)/tests/plant/cpu_kquant_order_swap
$(PLANT_KQ_BIN): tests/engine/test_cpu_kquant_kernels.c $(TEST_UTIL) $(PLANT_KQ_OBJ) $(LAYERS_engine)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(PLANT_KQ_OBJ) $(TEST_UTIL) $(LAYERS_engine) $(LIBS) $(TESTLIBS)

# The planted kvverify (test-only, never ./kvverify): the AVX2 table's
# invariant GEMM made batch-dependent (KVV_CPU_PLANT_GEMM_TILE: full
# 3-token tiles reduce their lanes in another order). tests/cli/test_isa.sh
# expects the audit's tables check to FAIL for avx2 with it.
PLANT_TILE_OBJ := $(O)/plant-tile/engine/cpu/cpu_kernels_avx2.o
$(O)/plant-tile/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(ISA_avx2) -DKVV_CPU_PLANT_GEMM_TILE -c $< -o $@
PLANT_TILE_BIN := $(O)/tests/plant/kvverify_gemm_tile
$(PLANT_TILE_BIN): $(call obj,$(CLI_SRC)) $(PLANT_TILE_OBJ) $(LAYERS_all)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(call obj,$(CLI_SRC)) $(PLANT_TILE_OBJ) $(LAYERS_all) $(LIBS)

# Fuzz targets: tests/fuzz/fuzz_*.c define LLVMFuzzerTestOneInput. The plain
# replay driver runs a corpus without libFuzzer, inside `make test`
# (fuzz_opts also links the command objects, all but main.o: $(L_CLI)).
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_REPLAY := $(patsubst tests/fuzz/%.c,$(O)/tests/fuzz/replay_%,$(FUZZ_SRC))
$(O)/tests/fuzz/replay_%: tests/fuzz/%.c tests/fuzz/replay.c $(L_CLI) $(LAYERS_all)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< tests/fuzz/replay.c $(L_CLI) $(LAYERS_all) $(LIBS)

# fuzz_plugin loads tests/fuzz/plugin/fuzzed_plugin.c, built beside it (its
# own version script also exports the script setter the target calls).
FUZZED_PLUGIN_SRC := tests/fuzz/plugin/fuzzed_plugin.c
FUZZED_PLUGIN_DEPS := $(FUZZED_PLUGIN_SRC) tests/fuzz/plugin/fuzzed_plugin.h \
  tests/fuzz/plugin/fuzzed_plugin.map include/kvverify/engine_plugin.h
FUZZED_PLUGIN_LDFLAGS = -shared -Wl,--version-script=tests/fuzz/plugin/fuzzed_plugin.map
$(O)/tests/fuzz/fuzzed_plugin.so: $(FUZZED_PLUGIN_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PLUGIN_CFLAGS) $(LDFLAGS) $(FUZZED_PLUGIN_LDFLAGS) $(if $(SAN),,-Wl,-z,defs) \
	  -o $@ $< -lm
$(O)/tests/fuzz/replay_fuzz_plugin: $(O)/tests/fuzz/fuzzed_plugin.so

test: $(BIN) kvverify plugins $(TEST_PLUGINS) $(TEST_BIN) $(FUZZ_REPLAY) $(PLANT_BIN) $(PLANT_KQ_BIN) $(PLANT_TILE_BIN)
	@O=$(O) sh tests/run_tests.sh

test-asan:
	$(MAKE) O=build-asan OPT="-O1 -g -fno-omit-frame-pointer" \
	  SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined" test

test-slow: $(BIN) plugins $(TEST_BIN)
	@O=$(O) KVV_SLOW=1 sh tests/run_tests.sh

FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_SAN := -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
# Layers each fuzz target links (default: all); building only those keeps a
# target usable while an unrelated layer does not compile with clang.
FUZZ_LAYERS_fuzz_gguf := model common
FUZZ_LAYERS_fuzz_kvv  := vectors model common
FUZZ_LAYERS_fuzz_tokenizer := model common
FUZZ_LAYERS_fuzz_vocab := model common
FUZZ_LAYERS_fuzz_opts := cli verify vectors engine reference runtime model common
FUZZ_LAYERS_fuzz_plugin := engine reference runtime model common
FUZZ_NAMES := $(basename $(notdir $(FUZZ_SRC)))
FUZZ_LIBS = $(foreach l,$(or $(FUZZ_LAYERS_$(FUZZ_TARGET)),verify vectors engine reference runtime model common),build-fuzz/libkvv_$(l).a)
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
	$(if $(filter fuzz_plugin,$(FUZZ_TARGET)),$(FUZZ_CC) -std=c11 -I. -Iinclude -O1 -g -fPIC \
	  $(FUZZED_PLUGIN_LDFLAGS) -o build-fuzz/fuzzed_plugin.so $(FUZZED_PLUGIN_SRC) -lm)

fuzz-one: fuzz-build
	mkdir -p build-fuzz/corpus-$(FUZZ_TARGET)
	./build-fuzz/$(FUZZ_TARGET) -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	  build-fuzz/corpus-$(FUZZ_TARGET) tests/fuzz/corpus/$(FUZZ_TARGET:fuzz_%=%)

bench: $(BIN)
	sh bench/run.sh
	sh bench/evict.sh
	sh bench/memory.sh

vectors-update: $(BIN)
	sh vectors/update.sh

clean:
	rm -rf build build-* kvverify

-include $(shell find $(O) -name '*.d' 2>/dev/null)
