/* isolate.c — one check in a child process, its result through a pipe,
 * under a time limit (see isolate.h). */
#include "verify/isolate.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/breadcrumb.h"
#include "verify/audit.h"

/* ---------------------------------------------------------- the wire
 *
 *   OFFSET SIZE  DESCRIPTION
 *   0      8     magic "KVVRES01"
 *   8      S     the kvv_check_result struct (S = its sizeof; pointers void)
 *   ...    R     rows[n_rows], controls[n_controls] (n_* from the struct)
 *   ...    8+K   key_full: u64 length (UINT64_MAX: none), bytes
 *   ...    8+M   message_full: the same
 *   ...    8+D   details: u64 length, compact JSON text
 *   ...    4     kvv_status the check returned
 *   ...    512   kvv_error.msg
 *   end    8     magic "KVVEND01" (a child killed mid-write never ends so)
 */
static const char magic[8] = {'K', 'V', 'V', 'R', 'E', 'S', '0', '1'};
static const char magic_end[8] = {'K', 'V', 'V', 'E', 'N', 'D', '0', '1'};

typedef struct {
    unsigned char *p;
    size_t n, cap;
    bool oom;
} wbuf;

static void put(wbuf *b, const void *src, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n > b->cap) {
        size_t nc = b->cap ? b->cap : 4096;
        while (nc < b->n + n)
            nc *= 2;
        unsigned char *q = realloc(b->p, nc);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = nc;
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void put_str(wbuf *b, const char *s)
{
    uint64_t len = s ? (uint64_t)strlen(s) : UINT64_MAX;
    put(b, &len, sizeof len);
    if (s)
        put(b, s, (size_t)len);
}

/* The result and the check's status, framed (the layout above). */
static kvv_status pack_all(const kvv_check_result *r, kvv_status st, const kvv_error *err,
                           unsigned char **out, size_t *len)
{
    wbuf b = {0};
    put(&b, magic, sizeof magic);
    put(&b, r, sizeof *r);
    if (r->n_rows)
        put(&b, r->rows, (size_t)r->n_rows * sizeof *r->rows);
    if (r->n_controls)
        put(&b, r->controls, (size_t)r->n_controls * sizeof *r->controls);
    put_str(&b, r->key_full);
    put_str(&b, r->message_full);
    char *d = r->details ? json_dumps(r->details, JSON_COMPACT) : NULL;
    put_str(&b, d ? d : "{}");
    free(d);
    int32_t s32 = (int32_t)st;
    put(&b, &s32, sizeof s32);
    char msg[KVV_ERROR_MSG_MAX];
    memset(msg, 0, sizeof msg);
    if (err)
        snprintf(msg, sizeof msg, "%s", err->msg);
    put(&b, msg, sizeof msg);
    put(&b, magic_end, sizeof magic_end);
    if (b.oom) {
        free(b.p);
        return KVV_ERR_NOMEM;
    }
    *out = b.p;
    *len = b.n;
    return KVV_OK;
}

kvv_status kvv_check_result_pack(const kvv_check_result *r, unsigned char **out, size_t *len)
{
    return pack_all(r, KVV_OK, NULL, out, len);
}

typedef struct {
    const unsigned char *p;
    size_t n, at;
} rbuf;

static bool get(rbuf *b, void *dst, size_t n)
{
    if (n > b->n - b->at)
        return false;
    memcpy(dst, b->p + b->at, n);
    b->at += n;
    return true;
}

/* A string of put_str: *out malloc'd, or NULL for none. */
static bool get_str(rbuf *b, char **out)
{
    uint64_t len;
    *out = NULL;
    if (!get(b, &len, sizeof len))
        return false;
    if (len == UINT64_MAX)
        return true;
    if (len > b->n - b->at || !(*out = malloc((size_t)len + 1)))
        return false;
    memcpy(*out, b->p + b->at, (size_t)len);
    (*out)[len] = '\0';
    b->at += (size_t)len;
    return true;
}

static kvv_status unpack_all(kvv_check_result *r, const unsigned char *buf, size_t len,
                             kvv_status *st, kvv_error *err)
{
    rbuf b = {buf, len, 0};
    char m[8];
    kvv_check_result t;
    if (!get(&b, m, sizeof m) || memcmp(m, magic, sizeof m) || !get(&b, &t, sizeof t) ||
        t.n_rows < 0 || t.n_controls < 0)
        return KVV_ERR_FORMAT;
    t.rows = NULL;
    t.controls = NULL;
    t.key_full = t.message_full = NULL;
    t.details = NULL;
    size_t rb = (size_t)t.n_rows * sizeof *t.rows, cb = (size_t)t.n_controls * sizeof *t.controls;
    bool ok = rb <= len - b.at && (!rb || (t.rows = malloc(rb)));
    ok = ok && (!rb || get(&b, t.rows, rb));
    ok = ok && cb <= len - b.at && (!cb || (t.controls = malloc(cb)));
    ok = ok && (!cb || get(&b, t.controls, cb));
    t.cap_rows = t.n_rows;
    t.cap_controls = t.n_controls;
    char *details = NULL;
    ok = ok && get_str(&b, &t.key_full) && get_str(&b, &t.message_full) && get_str(&b, &details);
    if (ok && details)
        ok = (t.details = json_loads(details, 0, NULL)) != NULL;
    free(details);
    int32_t s32 = 0;
    char msg[KVV_ERROR_MSG_MAX];
    ok = ok && get(&b, &s32, sizeof s32) && get(&b, msg, sizeof msg) && get(&b, m, sizeof m) &&
         memcmp(m, magic_end, sizeof m) == 0 && b.at == len;
    if (!ok) {
        kvv_check_result_free(&t);
        return KVV_ERR_FORMAT;
    }
    kvv_check_result_free(r);
    *r = t;
    msg[sizeof msg - 1] = '\0';
    if (st)
        *st = (kvv_status)s32;
    if (err && s32) {
        err->status = (kvv_status)s32;
        snprintf(err->msg, sizeof err->msg, "%s", msg);
    }
    return KVV_OK;
}

kvv_status kvv_check_result_unpack(kvv_check_result *r, const unsigned char *buf, size_t len)
{
    return unpack_all(r, buf, len, NULL, NULL);
}

const char *kvv_signal_name(int sig, char *buf, size_t size)
{
    static const struct { int sig; const char *name; } names[] = {
        {SIGSEGV, "SIGSEGV"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"}, {SIGFPE, "SIGFPE"},
        {SIGILL, "SIGILL"},   {SIGKILL, "SIGKILL"}, {SIGTERM, "SIGTERM"}, {SIGINT, "SIGINT"},
        {SIGTRAP, "SIGTRAP"}, {SIGPIPE, "SIGPIPE"}, {SIGSYS, "SIGSYS"}, {SIGXCPU, "SIGXCPU"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].sig == sig) {
            snprintf(buf, size, "%s", names[i].name);
            return buf;
        }
    snprintf(buf, size, "signal %d", sig);
    return buf;
}

/* ---------------------------------------------------------- the child */

static bool write_all(int fd, const unsigned char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

static void child(int fd, kvv_breadcrumb *crumb, kvv_isolate_fn fn, void *ctx,
                  kvv_check_result *r)
{
    /* the parent's handlers (suite's SIGINT) are not the child's; a crash
     * must reach the parent as the signal it is */
    static const int sigs[] = {SIGINT, SIGTERM, SIGPIPE, SIGSEGV, SIGBUS, SIGFPE, SIGILL};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        signal(sigs[i], sigs[i] == SIGINT ? SIG_IGN : SIG_DFL); /* ^C: the parent decides */
    kvv_breadcrumb_attach(crumb);
    kvv_error err = {0};
    kvv_status st = fn(ctx, r, &err);
    unsigned char *buf = NULL;
    size_t len = 0;
    if (pack_all(r, st, &err, &buf, &len) || !write_all(fd, buf, len))
        _exit(3);
    _exit(0);
}

/* ---------------------------------------------------------- the parent */

/* Read fd until end of file or the deadline. @return 1 EOF, 0 timeout, -1
 * out of memory, -2 stopped (*stop). */
static int read_until(int fd, double deadline, volatile sig_atomic_t *stop, wbuf *in)
{
    unsigned char chunk[65536];
    for (;;) {
        double left = deadline - kvv_now_seconds();
        if (stop && *stop)
            return -2;
        if (left <= 0)
            return 0;
        if (stop && left > 0.2)
            left = 0.2; /* look at the flag now and then (a signal may not interrupt poll) */
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int ms = left > 1e6 ? 1000000000 : (int)(left * 1000.0) + 1;
        int k = poll(&p, 1, ms);
        if (k < 0 && errno == EINTR)
            continue;
        if (k == 0)
            continue; /* the loop re-checks the deadline and the flag */
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return 1;
        put(in, chunk, (size_t)n);
        if (in->oom)
            return -1;
    }
}

static int wait_child(pid_t pid)
{
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return status;
}

kvv_status kvv_isolate_run(const kvv_isolate_opts *io, kvv_isolate_fn fn, void *ctx,
                           kvv_check_result *r, kvv_error *err)
{
    kvv_breadcrumb *crumb = mmap(NULL, sizeof *crumb, PROT_READ | PROT_WRITE,
                                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (crumb == MAP_FAILED)
        return kvv_error_set(err, KVV_ERR_INTERNAL, "%s: isolation: cannot map the breadcrumb: %s",
                             r->name, strerror(errno));
    memset(crumb, 0, sizeof *crumb);
    int fds[2];
    if (pipe(fds) != 0) {
        munmap(crumb, sizeof *crumb);
        return kvv_error_set(err, KVV_ERR_INTERNAL, "%s: isolation: pipe: %s", r->name,
                             strerror(errno));
    }
    fflush(NULL); /* nothing buffered is written twice */
    double t0 = kvv_now_seconds();
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        munmap(crumb, sizeof *crumb);
        return kvv_error_set(err, KVV_ERR_INTERNAL, "%s: isolation: fork: %s", r->name,
                             strerror(errno));
    }
    if (pid == 0) {
        close(fds[0]);
        child(fds[1], crumb, fn, ctx, r); /* never returns */
    }
    close(fds[1]);
    double limit = io && io->timeout > 0 ? io->timeout : 120.0;
    wbuf in = {0};
    int got = read_until(fds[0], t0 + limit, io ? io->stop : NULL, &in);
    if (got <= 0)
        kill(pid, SIGKILL);
    close(fds[0]);
    int status = wait_child(pid);
    double secs = kvv_now_seconds() - t0;
    char stage[160], sig[32], detail[400];
    kvv_breadcrumb_format(crumb, stage, sizeof stage);
    kvv_status st = KVV_OK;
    if (got == 0) {
        snprintf(detail, sizeof detail, "no result after %.0f s (killed; last stage: %s)", limit,
                 stage);
        kvv_check_set_fault(r, "timeout", detail);
    } else if (got == -2) {
        kvv_check_set_verdict(r, KVV_VERDICT_ERROR, "interrupted");
        kvv_check_set_message(r, "interrupted (the run was stopped by a signal)");
    } else if (got < 0) {
        st = kvv_error_set(err, KVV_ERR_NOMEM, "%s: out of memory reading the child's result",
                           r->name);
        kvv_check_set_error(r, err);
    } else if (WIFSIGNALED(status)) {
        snprintf(detail, sizeof detail, "%s in %s",
                 kvv_signal_name(WTERMSIG(status), sig, sizeof sig), stage);
        kvv_check_set_fault(r, "crash", detail);
    } else if (WEXITSTATUS(status) != 0 ||
               unpack_all(r, in.p, in.n, &st, err) != KVV_OK) {
        snprintf(detail, sizeof detail, "the check's process exited with status %d without a "
                 "whole result (last stage: %s)", WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                 stage);
        kvv_check_set_fault(r, "crash", detail);
        st = KVV_OK;
    }
    if (r->fault[0])
        r->seconds = secs;
    free(in.p);
    munmap(crumb, sizeof *crumb);
    return st;
}

/* ---------------------------------------------------------- checks */

bool kvv_isolate_wanted(const kvv_check_opts *o)
{
    return o->isolate == KVV_ISOLATE_ON ||
           (o->isolate == KVV_ISOLATE_AUTO && !kvv_engine_name_concurrent(o->engine.name));
}

double kvv_isolate_default_timeout(const kvv_check_opts *o)
{
    double macs = o->model ? kvv_audit_cost(&o->model->hp, o->n_tokens, o->n_gen) : 0;
    return 120.0 + macs / 1e7;
}

typedef struct {
    const kvv_check_opts *o;
    kvv_check_fn fn;
} check_ctx;

static kvv_status run_check(void *ctx, kvv_check_result *r, kvv_error *err)
{
    const check_ctx *c = ctx;
    return c->fn(c->o, r, err);
}

kvv_status kvv_isolate_check(const kvv_check_opts *o, kvv_check_fn fn, kvv_check_result *r,
                             kvv_error *err)
{
    if (!kvv_isolate_wanted(o))
        return fn(o, r, err);
    kvv_isolate_opts io = {.timeout = o->timeout > 0 ? o->timeout : kvv_isolate_default_timeout(o),
                           .stop = o->stop};
    check_ctx c = {o, fn};
    return kvv_isolate_run(&io, run_check, &c, r, err);
}
