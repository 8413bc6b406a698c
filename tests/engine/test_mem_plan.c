/*
 * test_mem_plan.c — the memory limit and the pre-check of planned
 * allocations (runtime/mem_limit.h) and the engines' plans
 * (kvv_ref_plan, kvv_cpu_engine_plan):
 *   - the arithmetic saturates, the formatting, a plan's message names
 *     every part;
 *   - each engine's plan matches what opening it really allocates (glibc's
 *     mallinfo2 before and after), for every type synth writes, three
 *     architectures, both cpu modes: never below it (an under-estimate
 *     would let a run past the pre-check into the hard cap), and not far
 *     above it (an over-estimate refuses runs that fit);
 *   - kvv_mem_limit_set in a child process: the data limit becomes what the
 *     process holds plus the cap, a mapping past it fails, a plan past it
 *     is KVV_ERR_NOMEM naming --max-memory, the engines refuse to open.
 * Needs nothing from ../shared.
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/cpu/cpu_engine.h"
#include "engine/engine.h"
#include "model/synth.h"
#include "reference/ref.h"
#include "runtime/mem_limit.h"
#include "tests/test_util.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

typedef struct {
    uint8_t *buf;
    kvv_model *m;
} synth_model;

static void synth_open(synth_model *s, const char *shape, kvv_type type)
{
    kvv_error err = {0};
    kvv_synth_opts o;
    memset(&o, 0, sizeof o);
    o.shape = kvv_shape_find(shape);
    assert_non_null(o.shape);
    o.type = type;
    o.seed = 3;
    kvv_gguf_writer *w;
    size_t size = 0;
    kvv_gguf *g = NULL;
    if (kvv_synth_build(&o, &w, &err) || kvv_gguf_writer_to_buffer(w, &s->buf, &size, &err))
        fail_msg("%s", err.msg);
    kvv_gguf_writer_free(w);
    if (kvv_gguf_open_memory(s->buf, size, shape, &g, &err) || kvv_model_from_gguf(g, &s->m, &err))
        fail_msg("%s", err.msg);
}

static void synth_close(synth_model *s)
{
    kvv_model_close(s->m);
    free(s->buf);
}

/* ------------------------------------------------------------ arithmetic */

static void test_arithmetic_and_messages(void **state)
{
    (void)state;
    assert_true(kvv_mem_mul(1ull << 40, 1ull << 30) == UINT64_MAX);
    assert_true(kvv_mem_mul(0, UINT64_MAX) == 0);
    assert_true(kvv_mem_mul(3, 5) == 15);
    assert_true(kvv_mem_add(UINT64_MAX - 1, 5) == UINT64_MAX);
    char b[32];
    assert_string_equal(kvv_mem_format(512, b, sizeof b), "512 B");
    assert_string_equal(kvv_mem_format(1536, b, sizeof b), "1.50 KiB");
    assert_string_equal(kvv_mem_format(12ull << 20, b, sizeof b), "12.0 MiB");
    assert_string_equal(kvv_mem_format(300ull << 30, b, sizeof b), "300 GiB");

    kvv_mem_plan p = kvv_mem_plan_new("test engine");
    kvv_mem_plan_add(&p, 0, "nothing");          /* dropped */
    kvv_mem_plan_add(&p, 1ull << 62, "weights");
    kvv_mem_plan_add(&p, 1ull << 62, "KV cache of %d positions", 4096);
    kvv_mem_plan_add(&p, 1ull << 63, "captures");
    assert_int_equal(p.n, 3);
    assert_true(kvv_mem_plan_total(&p) == UINT64_MAX);
    kvv_error err = {0};
    assert_int_equal(kvv_mem_plan_check(&p, &err), KVV_ERR_NOMEM);
    printf("%s\n", err.msg);
    assert_non_null(strstr(err.msg, "test engine: needs "));
    assert_non_null(strstr(err.msg, "weights 4.00 EiB"));
    assert_non_null(strstr(err.msg, "KV cache of 4096 positions 4.00 EiB"));
    assert_non_null(strstr(err.msg, "captures 8.00 EiB"));

    kvv_mem_plan small = kvv_mem_plan_new("small");
    kvv_mem_plan_add(&small, 4096, "a page");
    assert_int_equal(kvv_mem_plan_check(&small, &err), KVV_OK);
    /* more parts than slots: the rest are summed into the last */
    kvv_mem_plan many = kvv_mem_plan_new("many");
    for (int i = 0; i < KVV_MEM_PLAN_MAX + 3; i++)
        kvv_mem_plan_add(&many, 10, "part %d", i);
    assert_int_equal(many.n, KVV_MEM_PLAN_MAX);
    assert_true(kvv_mem_plan_total(&many) == 10 * (KVV_MEM_PLAN_MAX + 3));
    assert_true(kvv_mem_held() > 0);
    assert_true(kvv_mem_machine() > (64ull << 20));
}

/* ------------------------------------------------------------ plans vs reality */

static uint64_t allocated(void)
{
    struct mallinfo2 mi = mallinfo2();
    return (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
}

/* Open engine `name` (mode) on m; the plan must cover the bytes malloc
 * handed out, and be at most twice them plus 64 KiB. */
static void plan_matches(const kvv_model *m, const char *label, const char *name, kvv_mode mode)
{
    kvv_engine_opts o = kvv_engine_opts_default();
    o.name = name;
    o.mode = mode;
    o.n_threads = 1;
    kvv_mem_plan p;
    if (strcmp(name, "ref") == 0) {
        kvv_ref_opts ro = kvv_ref_opts_default();
        kvv_ref_plan(m, &ro, &p);
    } else {
        kvv_cpu_engine_plan(m, &o, NULL, &p);
    }
    uint64_t plan = kvv_mem_plan_total(&p);
    uint64_t before = allocated();
    kvv_engine *e = NULL;
    kvv_error err = {0};
    if (kvv_engine_open(m, &o, &e, &err))
        fail_msg("%s", err.msg);
    uint64_t used = allocated() - before;
    kvv_engine_close(e);
    printf("%-22s %-4s %-9s planned %9llu  allocated %9llu\n", label, name, kvv_mode_name(mode),
           (unsigned long long)plan, (unsigned long long)used);
    if (UNDER_ASAN)
        return; /* ASan's allocator keeps its own books */
    /* not in the plan: the engine's own small structs and malloc's
     * rounding of each large block to whole pages (a page per tensor) */
    assert_true(used <= plan + 4096 * (m->gguf->n_tensors + 4));
    assert_true(plan <= 2 * used + (64u << 10));
}

static void test_plans_match_allocations(void **state)
{
    (void)state;
    static const char *const shapes[] = {"llama-tiny", "qwen2-tiny", "phi3-tiny"};
    static const kvv_type types[] = {KVV_TYPE_F32, KVV_TYPE_F16, KVV_TYPE_BF16, KVV_TYPE_Q8_0,
                                     KVV_TYPE_Q4_0, KVV_TYPE_Q5_0};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
            synth_model sm;
            synth_open(&sm, shapes[s], types[t]);
            char label[64];
            snprintf(label, sizeof label, "%s %s", shapes[s], kvv_type_name(types[t]));
            plan_matches(sm.m, label, "ref", KVV_MODE_EXACT);
            plan_matches(sm.m, label, "cpu", KVV_MODE_INVARIANT);
            plan_matches(sm.m, label, "cpu", KVV_MODE_FAST);
            synth_close(&sm);
        }
}

/* ------------------------------------------------------------ the limit */

/* In a child (the limit cannot be lifted again): the code of the first
 * broken expectation, 0 when all hold. */
static int limited_child(void)
{
    const uint64_t cap = 16ull << 20;
    kvv_error err = {0};
    if (kvv_mem_limit_set(cap, &err) != KVV_OK)
        return 10;
    uint64_t avail = kvv_mem_available();
    if (avail > cap || avail < cap / 2)
        return 11;
    /* a private writable mapping past the cap fails (malloc's path too) */
    void *big = mmap(NULL, (size_t)(64ull << 20), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (big != MAP_FAILED)
        return 12;
    void *fits = mmap(NULL, (size_t)(4ull << 20), PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (fits == MAP_FAILED)
        return 13;
    munmap(fits, (size_t)(4ull << 20));
    kvv_mem_plan p = kvv_mem_plan_new("child");
    kvv_mem_plan_add(&p, 32ull << 20, "too much");
    if (kvv_mem_plan_check(&p, &err) != KVV_ERR_NOMEM || !strstr(err.msg, "--max-memory") ||
        !strstr(err.msg, "too much 32.0 MiB"))
        return 14;
    kvv_mem_plan q = kvv_mem_plan_new("child");
    kvv_mem_plan_add(&q, 1ull << 20, "enough");
    if (kvv_mem_plan_check(&q, &err) != KVV_OK)
        return 15;
    /* a cap above the hard limit is refused */
    if (kvv_mem_limit_set(UINT64_MAX / 2, &err) == KVV_OK && kvv_mem_available() == 0)
        return 16;
    return 0;
}

static void test_limit_in_child(void **state)
{
    (void)state;
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(limited_child());
    int ws = 0;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    assert_true(WIFEXITED(ws));
    if (WEXITSTATUS(ws) != 0)
        fail_msg("limited child failed expectation %d", WEXITSTATUS(ws));
}

/* With a cap smaller than its plan, an engine refuses to open, naming the
 * parts; the model's own memory is untouched. */
static void test_engines_refuse_under_cap(void **state)
{
    (void)state;
    synth_model sm;
    synth_open(&sm, "llama-tiny", KVV_TYPE_F32);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        kvv_error err = {0};
        if (kvv_mem_limit_set(256u << 10, &err) != KVV_OK)
            _exit(10);
        kvv_engine_opts o = kvv_engine_opts_default();
        kvv_engine *e = NULL;
        if (kvv_engine_open(sm.m, &o, &e, &err) != KVV_ERR_NOMEM ||
            !strstr(err.msg, "reference engine: needs") || !strstr(err.msg, "norm and bias vectors as fp32"))
            _exit(11);
        o.name = "cpu";
        o.mode = KVV_MODE_INVARIANT;
        if (kvv_engine_open(sm.m, &o, &e, &err) != KVV_ERR_NOMEM ||
            !strstr(err.msg, "cpu engine: needs") || !strstr(err.msg, "KV cache of"))
            _exit(12);
        _exit(0);
    }
    int ws = 0;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    assert_true(WIFEXITED(ws));
    if (WEXITSTATUS(ws) != 0)
        fail_msg("child failed expectation %d", WEXITSTATUS(ws));
    synth_close(&sm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arithmetic_and_messages),
        cmocka_unit_test(test_plans_match_allocations),
        cmocka_unit_test(test_limit_in_child),
        cmocka_unit_test(test_engines_refuse_under_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
