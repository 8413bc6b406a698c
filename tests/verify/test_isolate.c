/*
 * test_isolate.c — the fork/pipe/timeout layer of verify/isolate.h: a
 * result crosses the pipe whole (rows, controls, long texts, details); a
 * child that dies by a signal, exits early or hangs becomes a crash or
 * timeout fault with the breadcrumb's stage; a stop flag ends the wait;
 * a result that is cut is refused by the reader; the atomic writer leaves
 * no temp file; many jobs run side by side, forked from one thread. No
 * ../shared needed.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine/breadcrumb.h"
#include "engine/engine.h"
#include "common/atomic_file.h"
#include "model/synth.h"
#include "tests/test_util.h"
#include "verify/isolate.h"

/* A full result: rows, a control, a mismatch, a long message, details. */
static kvv_status fill_result(void *ctx, kvv_check_result *r, kvv_error *err)
{
    (void)ctx;
    (void)err;
    kvv_cmp_stats st;
    kvv_cmp_init(&st);
    kvv_check_add_row(r, 3, "K all", &st);
    kvv_check_add_control(r, "flipped bit", true, "%d of %d differ", 1, 64);
    kvv_check_note_mismatch(r, &(kvv_mismatch){.tensor = "K", .layer = 2, .token = 5,
                                               .head = -1, .index = 7, .expected = 1.0f,
                                               .actual = 2.0f});
    char longmsg[900];
    memset(longmsg, 'x', sizeof longmsg - 1);
    longmsg[sizeof longmsg - 1] = '\0';
    kvv_check_set_message(r, "%s", longmsg);
    json_object_set_new(r->details, "chunk", json_integer(5));
    kvv_check_set_verdict(r, KVV_VERDICT_FAIL, "1 of 64 differ");
    return KVV_OK;
}

static void test_result_crosses_whole(void **state)
{
    (void)state;
    kvv_check_result r;
    kvv_check_result_init(&r, "kv");
    kvv_error err = {0};
    kvv_isolate_opts io = {.timeout = 30};
    assert_int_equal(kvv_isolate_run(&io, fill_result, NULL, &r, &err), KVV_OK);
    assert_int_equal(r.verdict, KVV_VERDICT_FAIL);
    assert_string_equal(r.fault, "");
    assert_int_equal(r.n_rows, 1);
    assert_int_equal(r.rows[0].layer, 3);
    assert_string_equal(r.rows[0].what, "K all");
    assert_int_equal(r.n_controls, 1);
    assert_true(r.controls[0].detected);
    assert_true(r.has_mismatch);
    assert_int_equal(r.mismatch.token, 5);
    assert_int_equal((int)strlen(kvv_check_message(&r)), 899);
    assert_int_equal(json_integer_value(json_object_get(r.details, "chunk")), 5);
    /* and the same bytes, cut anywhere, are refused */
    unsigned char *buf;
    size_t len;
    assert_int_equal(kvv_check_result_pack(&r, &buf, &len), KVV_OK);
    kvv_check_result t;
    kvv_check_result_init(&t, "t");
    assert_int_equal(kvv_check_result_unpack(&t, buf, len), KVV_OK);
    assert_int_equal(t.n_rows, 1);
    for (size_t cut = 0; cut < len; cut += len / 13 + 1)
        assert_int_equal(kvv_check_result_unpack(&t, buf, cut), KVV_ERR_FORMAT);
    free(buf);
    kvv_check_result_free(&t);
    kvv_check_result_free(&r);
}

static kvv_status segv_in_forward(void *ctx, kvv_check_result *r, kvv_error *err)
{
    (void)ctx;
    (void)r;
    (void)err;
    kvv_breadcrumb_enter(KVV_CRUMB_FORWARD);
    kvv_breadcrumb_positions(0, 31);
    kvv_breadcrumb_layer(3, 17, 17);
    signal(SIGSEGV, SIG_DFL); /* a sanitizer's handler would exit instead */
    raise(SIGSEGV);
    return KVV_OK;
}

static void test_crash(void **state)
{
    (void)state;
    kvv_check_result r;
    kvv_check_result_init(&r, "kv");
    kvv_error err = {0};
    kvv_isolate_opts io = {.timeout = 30};
    assert_int_equal(kvv_isolate_run(&io, segv_in_forward, NULL, &r, &err), KVV_OK);
    assert_int_equal(r.verdict, KVV_VERDICT_FAIL);
    assert_string_equal(r.fault, "crash");
    assert_string_equal(kvv_check_message(&r), "SIGSEGV in forward, layer 3, position 17");
    kvv_check_result_free(&r);
}

/* A built-in engine's crash names the layer its hooks last reported: a
 * residual hook that raises SIGSEGV entering layer 1 of a real forward. */
static void segv_hook(void *user, int layer, int n, const int32_t *pos, float *h)
{
    (void)user;
    (void)n;
    (void)pos;
    (void)h;
    if (layer == 1) {
        signal(SIGSEGV, SIG_DFL);
        raise(SIGSEGV);
    }
}

static kvv_status forward_crash(void *ctx, kvv_check_result *r, kvv_error *err)
{
    (void)r;
    const char *const *a = ctx; /* model path, engine name */
    kvv_model *m = NULL;
    kvv_engine *e = NULL;
    kvv_engine_opts o = kvv_engine_opts_default();
    o.name = a[1];
    o.mode = kvv_engine_default_mode(o.name);
    o.n_ctx = 8;
    kvv_status s = kvv_model_open(a[0], &m, err);
    if (!s)
        s = kvv_engine_open(m, &o, &e, err);
    if (!s) {
        const int32_t tok[4] = {1, 2, 3, 4}, pos[4] = {0, 1, 2, 3};
        kvv_hooks hk = {.residual = segv_hook};
        s = kvv_engine_forward(e, 4, tok, pos, &hk, KVV_LOGITS_NONE, NULL, err);
    }
    kvv_engine_close(e);
    kvv_model_close(m);
    return s;
}

static void test_builtin_crash_names_layer(void **state)
{
    (void)state;
    char path[1100];
    snprintf(path, sizeof path, "%s/isolate-llama-tiny.gguf", kvv_test_tmpdir());
    kvv_synth_opts so;
    memset(&so, 0, sizeof so);
    so.shape = kvv_shape_find("llama-tiny");
    so.type = KVV_TYPE_F32;
    so.seed = 1;
    kvv_error err = {0};
    if (kvv_synth_write(&so, path, &err))
        fail_msg("%s", err.msg);
    const char *engines[] = {"ref", "cpu"};
    for (int i = 0; i < 2; i++) {
        const char *args[2] = {path, engines[i]};
        kvv_check_result r;
        kvv_check_result_init(&r, "kv");
        kvv_isolate_opts io = {.timeout = 60};
        assert_int_equal(kvv_isolate_run(&io, forward_crash, (void *)args, &r, &err), KVV_OK);
        assert_string_equal(r.fault, "crash");
        assert_string_equal(kvv_check_message(&r), "SIGSEGV in forward, layer 1, positions 0..3");
        kvv_check_result_free(&r);
    }
    remove(path);
}

static kvv_status exit_early(void *ctx, kvv_check_result *r, kvv_error *err)
{
    (void)ctx;
    (void)r;
    (void)err;
    _exit(7);
}

static void test_exit_without_result(void **state)
{
    (void)state;
    kvv_check_result r;
    kvv_check_result_init(&r, "patch");
    kvv_error err = {0};
    kvv_isolate_opts io = {.timeout = 30};
    assert_int_equal(kvv_isolate_run(&io, exit_early, NULL, &r, &err), KVV_OK);
    assert_string_equal(r.fault, "crash");
    assert_non_null(strstr(kvv_check_message(&r), "exited with status 7"));
    assert_non_null(strstr(kvv_check_message(&r), "before any engine call"));
    kvv_check_result_free(&r);
}

static kvv_status hang(void *ctx, kvv_check_result *r, kvv_error *err)
{
    (void)ctx;
    (void)r;
    (void)err;
    kvv_breadcrumb_enter(KVV_CRUMB_KV_READ);
    kvv_breadcrumb_layer(1, 4, 9);
    for (;;)
        pause();
    return KVV_OK;
}

static void test_timeout(void **state)
{
    (void)state;
    kvv_check_result r;
    kvv_check_result_init(&r, "greedy");
    kvv_error err = {0};
    kvv_isolate_opts io = {.timeout = 0.3};
    assert_int_equal(kvv_isolate_run(&io, hang, NULL, &r, &err), KVV_OK);
    assert_int_equal(r.verdict, KVV_VERDICT_FAIL);
    assert_string_equal(r.fault, "timeout");
    assert_non_null(strstr(kvv_check_message(&r), "kv_read, layer 1, positions 4..9"));
    kvv_check_result_free(&r);
}

static void test_stop_flag(void **state)
{
    (void)state;
    volatile sig_atomic_t stop = 1; /* already set: the wait ends at once */
    kvv_check_result r;
    kvv_check_result_init(&r, "greedy");
    kvv_error err = {0};
    kvv_isolate_opts io = {.timeout = 600, .stop = &stop};
    assert_int_equal(kvv_isolate_run(&io, hang, NULL, &r, &err), KVV_OK);
    assert_int_equal(r.verdict, KVV_VERDICT_ERROR);
    assert_string_equal(r.fault, "");
    kvv_check_result_free(&r);
}

/* A check's non-OK status comes back too. */
static kvv_status fails_nomem(void *ctx, kvv_check_result *r, kvv_error *err)
{
    (void)ctx;
    kvv_error_set(err, KVV_ERR_UNSUPPORTED, "engine x does not offer kv-read");
    kvv_check_set_error(r, err);
    return KVV_ERR_UNSUPPORTED;
}

static void test_status_returns(void **state)
{
    (void)state;
    kvv_check_result r;
    kvv_check_result_init(&r, "kv");
    kvv_error err = {0};
    kvv_isolate_opts io = {.timeout = 30};
    assert_int_equal(kvv_isolate_run(&io, fails_nomem, NULL, &r, &err), KVV_ERR_UNSUPPORTED);
    assert_int_equal(r.verdict, KVV_VERDICT_SKIPPED);
    assert_true(r.unsupported);
    assert_string_equal(err.msg, "engine x does not offer kv-read");
    kvv_check_result_free(&r);
}

static void test_contract_error_is_fault(void **state)
{
    (void)state;
    kvv_check_result r;
    kvv_check_result_init(&r, "kv");
    kvv_error err = {0};
    kvv_error_set(&err, KVV_ERR_ENGINE, "forward: logits: 1 NaN");
    kvv_check_set_error(&r, &err);
    assert_int_equal(r.verdict, KVV_VERDICT_FAIL);
    assert_string_equal(r.fault, "contract");
    assert_int_equal(kvv_exit_code(KVV_ERR_ENGINE), KVV_EXIT_FAIL);
    kvv_check_result_free(&r);
}

static void test_signal_names(void **state)
{
    (void)state;
    char b[32];
    assert_string_equal(kvv_signal_name(SIGSEGV, b, sizeof b), "SIGSEGV");
    assert_string_equal(kvv_signal_name(SIGABRT, b, sizeof b), "SIGABRT");
    assert_string_equal(kvv_signal_name(63, b, sizeof b), "signal 63");
}

/* The default limit: 120 s with no model; ten times that off the CPU. */
static void test_default_timeout(void **state)
{
    (void)state;
    kvv_check_opts o = kvv_check_opts_default();
    double cpu = kvv_isolate_default_timeout(&o);
    assert_true(cpu == 120.0);
    o.engine.device = "cpu";
    assert_true(kvv_isolate_default_timeout(&o) == cpu);
    o.engine.device = "vulkan";
    assert_true(kvv_isolate_default_timeout(&o) == 10 * cpu);
}

static void test_atomic_write(void **state)
{
    (void)state;
    char path[1024], tmp[1100];
    snprintf(path, sizeof path, "%s/atomic.json", kvv_test_tmpdir());
    kvv_error err = {0};
    assert_int_equal(kvv_write_file_atomic(path, "{}\n", 3, &err), KVV_OK);
    kvv_atomic_temp_name(path, tmp, sizeof tmp);
    assert_int_equal(access(tmp, F_OK), -1); /* renamed away */
    size_t n;
    uint8_t *b = kvv_test_read_file(path, &n);
    assert_non_null(b);
    assert_int_equal(n, 3);
    free(b);
    /* a folder that does not exist: an error naming the file, no temp left */
    snprintf(path, sizeof path, "%s/no/such/dir/r.json", kvv_test_tmpdir());
    assert_int_equal(kvv_write_file_atomic(path, "x", 1, &err), KVV_ERR_IO);
    assert_non_null(strstr(err.msg, "r.json"));
}

/* ---------------------------------------------------------- many jobs */

/* Shared with the children: how many ran at once, at most. */
typedef struct {
    int running, most;
} overlap;

/* The parent's thread count, from /proc/PPID/status (-1: unreadable). */
static int parent_threads(void)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)getppid());
    FILE *f = fopen(path, "r");
    int n = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "Threads:", 8) == 0)
            n = atoi(line + 8);
    if (f)
        fclose(f);
    return n;
}

/* Job j: 0 and 3 a full result, 1 a crash, 2 a hang; each notes how many
 * jobs overlap it and how many threads its parent has. */
static kvv_status many_job(void *ctx, int job, kvv_check_result *r, kvv_error *err)
{
    overlap *ov = ctx;
    int now = __atomic_add_fetch(&ov->running, 1, __ATOMIC_SEQ_CST);
    int seen = __atomic_load_n(&ov->most, __ATOMIC_SEQ_CST);
    while (now > seen && !__atomic_compare_exchange_n(&ov->most, &seen, now, false,
                                                      __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        ;
    usleep(300 * 1000); /* long enough for the next child to start beside this one */
    kvv_check_set_message(r, "parent threads %d", parent_threads());
    __atomic_sub_fetch(&ov->running, 1, __ATOMIC_SEQ_CST);
    if (job == 1)
        return segv_in_forward(NULL, r, err);
    if (job == 2)
        return hang(NULL, r, err);
    kvv_check_set_verdict(r, KVV_VERDICT_PASS, "job %d", job);
    return KVV_OK;
}

/* kvv_isolate_run_jobs: each job gets its own verdict (pass, crash,
 * timeout), two children run at once and never three, and the parent forks
 * them from its one thread (a fork beside a thread in malloc can hang the
 * child: verify/isolate.h). */
static void test_jobs_side_by_side(void **state)
{
    (void)state;
    overlap *ov = mmap(NULL, sizeof *ov, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(ov != MAP_FAILED);
    memset(ov, 0, sizeof *ov);
    enum { N = 5 };
    kvv_check_result res[N], *rs[N];
    for (int j = 0; j < N; j++) {
        kvv_check_result_init(&res[j], "job");
        rs[j] = &res[j];
    }
    kvv_error err = {0};
    kvv_isolate_opts io = {.timeout = 2};
    assert_int_equal(kvv_isolate_run_jobs(&io, N, 2, many_job, ov, rs, &err), KVV_OK);
    assert_int_equal(ov->most, 2);
    for (int j = 0; j < N; j++) {
        if (j == 1) {
            assert_string_equal(res[j].fault, "crash");
            assert_string_equal(kvv_check_message(&res[j]), "SIGSEGV in forward, layer 3, position 17");
        } else if (j == 2) {
            assert_string_equal(res[j].fault, "timeout");
        } else {
            assert_int_equal(res[j].verdict, KVV_VERDICT_PASS);
            assert_string_equal(kvv_check_message(&res[j]), "parent threads 1");
        }
        kvv_check_result_free(&res[j]);
    }
    munmap(ov, sizeof *ov);
}

/* With the stop flag set no job starts, and every result says so. */
static void test_jobs_stopped(void **state)
{
    (void)state;
    volatile sig_atomic_t stop = 1;
    kvv_check_result res[3], *rs[3];
    for (int j = 0; j < 3; j++) {
        kvv_check_result_init(&res[j], "job");
        rs[j] = &res[j];
    }
    kvv_error err = {0};
    overlap ov = {0};
    kvv_isolate_opts io = {.timeout = 600, .stop = &stop};
    assert_int_equal(kvv_isolate_run_jobs(&io, 3, 2, many_job, &ov, rs, &err), KVV_OK);
    for (int j = 0; j < 3; j++) {
        assert_int_equal(res[j].verdict, KVV_VERDICT_ERROR);
        assert_non_null(strstr(kvv_check_message(&res[j]), "interrupted"));
        kvv_check_result_free(&res[j]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_result_crosses_whole),
        cmocka_unit_test(test_crash),
        cmocka_unit_test(test_builtin_crash_names_layer),
        cmocka_unit_test(test_exit_without_result),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_stop_flag),
        cmocka_unit_test(test_status_returns),
        cmocka_unit_test(test_contract_error_is_fault),
        cmocka_unit_test(test_signal_names),
        cmocka_unit_test(test_atomic_write),
        cmocka_unit_test(test_default_timeout),
        cmocka_unit_test(test_jobs_side_by_side),
        cmocka_unit_test(test_jobs_stopped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
