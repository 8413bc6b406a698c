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
#if defined(__linux__)
#include <sys/prctl.h>
#endif

#include "engine/breadcrumb.h"
#include "verify/audit_plan.h"

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

/* The child's start: the parent's handlers (cli/interrupt.h's SIGINT) are
 * not the child's, and a crash must reach the parent as the signal it is.
 * ^C is the parent's to decide (it kills the child), and the child dies
 * with its parent however the parent ends (SIGKILL, a second ^C): no check
 * goes on alone under init. SIGPIPE stays as the parent has it (the
 * command ignores it, cli/main.c): a table printed to a closed stdout is
 * not a crash of the engine. */
static void child_start(kvv_breadcrumb *crumb, pid_t parent)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGSEGV, SIGBUS, SIGFPE, SIGILL};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        signal(sigs[i], sigs[i] == SIGINT ? SIG_IGN : SIG_DFL);
#if defined(__linux__)
    prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
    if (getppid() != parent) /* the parent died before the line above */
        _exit(3);
    kvv_breadcrumb_attach(crumb);
}

/* A check in the child: its result, packed, to fd. */
typedef struct {
    kvv_isolate_fn fn;
    void *ctx;
    kvv_check_result *r;
} check_body;

static bool check_child(void *u, int fd)
{
    check_body *b = u;
    kvv_error err = {0};
    kvv_status st = b->fn(b->ctx, b->r, &err);
    unsigned char *buf = NULL;
    size_t len = 0;
    return pack_all(b->r, st, &err, &buf, &len) == KVV_OK && write_all(fd, buf, len);
}

/* ---------------------------------------------------------- the parent */

/* One child: its process, its pipe's reading end, its breadcrumb, and what
 * it gave — got (1 EOF, 0 timeout, -1 out of memory, -2 stopped), its wait
 * status, the bytes it wrote and its last stage. */
typedef struct {
    pid_t pid;
    int fd;
    kvv_breadcrumb *crumb;
    double t0, deadline;
    int got;
    int status;
    wbuf in;
    char stage[160];
    double seconds;
} child_run;

/* Fork; in the child body(u, fd) and _exit (0 when it returned true). In
 * the parent cr holds the child, its pipe and its deadline (now + limit).
 * KVV_ERR_INTERNAL (naming `what`) when the breadcrumb, the pipe or the fork
 * could not be made. */
static kvv_status child_spawn(double limit, bool (*body)(void *, int), void *u, const char *what,
                              child_run *cr, kvv_error *err)
{
    memset(cr, 0, sizeof *cr);
    cr->fd = -1;
    kvv_breadcrumb *crumb = mmap(NULL, sizeof *crumb, PROT_READ | PROT_WRITE,
                                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (crumb == MAP_FAILED)
        return kvv_error_set(err, KVV_ERR_INTERNAL, "%s: isolation: cannot map the breadcrumb: %s",
                             what, strerror(errno));
    memset(crumb, 0, sizeof *crumb);
    int fds[2];
    if (pipe(fds) != 0) {
        munmap(crumb, sizeof *crumb);
        return kvv_error_set(err, KVV_ERR_INTERNAL, "%s: isolation: pipe: %s", what,
                             strerror(errno));
    }
    fflush(NULL); /* nothing buffered is written twice */
    cr->t0 = kvv_now_seconds();
    cr->deadline = cr->t0 + limit;
    const pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        munmap(crumb, sizeof *crumb);
        return kvv_error_set(err, KVV_ERR_INTERNAL, "%s: isolation: fork: %s", what,
                             strerror(errno));
    }
    if (pid == 0) {
        close(fds[0]);
        child_start(crumb, parent);
        _exit(body(u, fds[1]) ? 0 : 3);
    }
    close(fds[1]);
    cr->pid = pid;
    cr->fd = fds[0];
    cr->crumb = crumb;
    return KVV_OK;
}

/* Read what the pipe holds now (poll said it is readable). @return 1 at end
 * of file, 0 when more may come, -1 out of memory. */
static int child_read(child_run *cr)
{
    unsigned char chunk[65536];
    ssize_t n = read(cr->fd, chunk, sizeof chunk);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return 0;
    if (n <= 0)
        return 1;
    put(&cr->in, chunk, (size_t)n);
    return cr->in.oom ? -1 : 0;
}

/* The child is done (cr->got set): kill it unless it ended its output, close
 * the pipe, reap it and read its breadcrumb's last stage. */
static void child_reap(child_run *cr)
{
    if (cr->got <= 0)
        kill(cr->pid, SIGKILL);
    close(cr->fd);
    cr->fd = -1;
    int status = 0;
    while (waitpid(cr->pid, &status, 0) < 0 && errno == EINTR)
        ;
    cr->status = status;
    cr->seconds = kvv_now_seconds() - cr->t0;
    kvv_breadcrumb_format(cr->crumb, cr->stage, sizeof cr->stage);
    munmap(cr->crumb, sizeof *cr->crumb);
    cr->crumb = NULL;
}

/* Spawn, read until end of file, the limit or *stop, reap. */
static kvv_status fork_run(double limit, volatile sig_atomic_t *stop, bool (*body)(void *, int),
                           void *u, const char *what, child_run *cr, kvv_error *err)
{
    kvv_status st = child_spawn(limit, body, u, what, cr, err);
    if (st)
        return st;
    for (;;) {
        double left = cr->deadline - kvv_now_seconds();
        if (stop && *stop) {
            cr->got = -2;
            break;
        }
        if (left <= 0) {
            cr->got = 0;
            break;
        }
        if (stop && left > 0.2)
            left = 0.2; /* look at the flag now and then (a signal may not interrupt poll) */
        struct pollfd p = {.fd = cr->fd, .events = POLLIN};
        int ms = left > 1e6 ? 1000000000 : (int)(left * 1000.0) + 1;
        if (poll(&p, 1, ms) <= 0)
            continue; /* EINTR or nothing yet: the loop re-checks the deadline and the flag */
        int k = child_read(cr);
        if (k != 0) {
            cr->got = k;
            break;
        }
    }
    child_reap(cr);
    return KVV_OK;
}

/* The verdict of a reaped check child into r (see isolate.h); the child's
 * own status comes back as the return value, with err. */
static kvv_status check_outcome(child_run *cr, double limit, kvv_check_result *r, kvv_error *err)
{
    kvv_status st = KVV_OK;
    char sig[32], detail[400];
    if (cr->got == 0) {
        snprintf(detail, sizeof detail, "no result after %.3g s (killed; last stage: %s)", limit,
                 cr->stage);
        kvv_check_set_fault(r, "timeout", detail);
    } else if (cr->got == -2) {
        kvv_check_set_interrupted(r);
    } else if (cr->got < 0) {
        st = kvv_error_set(err, KVV_ERR_NOMEM, "%s: out of memory reading the child's result",
                           r->name);
        kvv_check_set_error(r, err);
    } else if (WIFSIGNALED(cr->status)) {
        snprintf(detail, sizeof detail, "%s in %s",
                 kvv_signal_name(WTERMSIG(cr->status), sig, sizeof sig), cr->stage);
        kvv_check_set_fault(r, "crash", detail);
    } else if (WEXITSTATUS(cr->status) != 0 ||
               unpack_all(r, cr->in.p, cr->in.n, &st, err) != KVV_OK) {
        snprintf(detail, sizeof detail, "the check's process exited with status %d without a "
                 "whole result (last stage: %s)",
                 WIFEXITED(cr->status) ? WEXITSTATUS(cr->status) : -1, cr->stage);
        kvv_check_set_fault(r, "crash", detail);
        st = KVV_OK;
    }
    if (r->fault[0])
        r->seconds = cr->seconds;
    free(cr->in.p);
    cr->in = (wbuf){0};
    return st;
}

kvv_status kvv_isolate_run(const kvv_isolate_opts *io, kvv_isolate_fn fn, void *ctx,
                           kvv_check_result *r, kvv_error *err)
{
    double limit = io && io->timeout > 0 ? io->timeout : 120.0;
    check_body body = {fn, ctx, r};
    child_run cr;
    kvv_status st = fork_run(limit, io ? io->stop : NULL, check_child, &body, r->name, &cr, err);
    return st ? st : check_outcome(&cr, limit, r, err);
}

/* ---------------------------------------------------------- many checks */

/* Job j of kvv_isolate_run_jobs as a kvv_isolate_fn (runs in its child). */
typedef struct {
    kvv_isolate_job_fn fn;
    void *ctx;
    int job;
} job_body;

static kvv_status run_job(void *u, kvv_check_result *r, kvv_error *err)
{
    const job_body *j = u;
    return j->fn(j->ctx, j->job, r, err);
}

/* A job's child is done (c->got set): reap it and put its verdict in r; the
 * first failure of the harness itself (out of memory) goes to *first/err. */
static void finish_job(child_run *c, double limit, kvv_check_result *r, kvv_status *first,
                       kvv_error *err)
{
    child_reap(c);
    kvv_error e = {0};
    kvv_status cs = check_outcome(c, limit, r, &e);
    if (cs && !*first && (cs == KVV_ERR_NOMEM || cs == KVV_ERR_INTERNAL))
        *first = kvv_error_set(err, cs, "%s", e.msg);
}

#define MAX_AT_ONCE 64

kvv_status kvv_isolate_run_jobs(const kvv_isolate_opts *io, int n_jobs, int at_once,
                                kvv_isolate_job_fn fn, void *ctx, kvv_check_result *const *rs,
                                kvv_error *err)
{
    double limit = io && io->timeout > 0 ? io->timeout : 120.0;
    volatile sig_atomic_t *stop = io ? io->stop : NULL;
    if (at_once < 1)
        at_once = 1;
    if (at_once > MAX_AT_ONCE)
        at_once = MAX_AT_ONCE;
    child_run kids[MAX_AT_ONCE];
    int job_of[MAX_AT_ONCE]; /* -1: the slot is free */
    for (int s = 0; s < at_once; s++)
        job_of[s] = -1;
    kvv_status first = KVV_OK;
    int next = 0, running = 0;
    while (next < n_jobs || running) {
        bool stopped = stop && *stop;
        /* fill the free slots, all from this thread */
        for (int s = 0; s < at_once && next < n_jobs && !stopped; s++) {
            if (job_of[s] >= 0)
                continue;
            int j = next++;
            job_body jb = {fn, ctx, j};
            check_body body = {run_job, &jb, rs[j]};
            kvv_error e = {0};
            if (child_spawn(limit, check_child, &body, rs[j]->name, &kids[s], &e) != KVV_OK) {
                kvv_check_set_error(rs[j], &e);
                if (!first)
                    first = kvv_error_set(err, e.status, "%s", e.msg);
                continue;
            }
            job_of[s] = j;
            running++;
        }
        if (stopped) {
            for (; next < n_jobs; next++)
                kvv_check_set_interrupted(rs[next]);
        }
        if (!running)
            continue;
        /* wait for the first of: output, a deadline, the flag */
        struct pollfd p[MAX_AT_ONCE];
        int slot[MAX_AT_ONCE], np = 0;
        double now = kvv_now_seconds(), left = 1e9;
        for (int s = 0; s < at_once; s++) {
            if (job_of[s] < 0)
                continue;
            child_run *c = &kids[s];
            if (stopped)
                c->got = -2;
            else if (c->deadline <= now)
                c->got = 0;
            else {
                if (c->deadline - now < left)
                    left = c->deadline - now;
                p[np] = (struct pollfd){.fd = c->fd, .events = POLLIN};
                slot[np++] = s;
                continue;
            }
            finish_job(c, limit, rs[job_of[s]], &first, err);
            job_of[s] = -1;
            running--;
        }
        if (!np)
            continue;
        if (stop && left > 0.2)
            left = 0.2; /* look at the flag now and then (a signal may not interrupt poll) */
        int ms = left > 1e6 ? 1000000000 : (int)(left * 1000.0) + 1;
        if (poll(p, (nfds_t)np, ms) <= 0)
            continue; /* EINTR or nothing yet: the loop re-checks deadlines and the flag */
        for (int k = 0; k < np; k++) {
            if (!(p[k].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            int s = slot[k];
            child_run *c = &kids[s];
            int got = child_read(c);
            if (got == 0)
                continue;
            c->got = got;
            finish_job(c, limit, rs[job_of[s]], &first, err);
            job_of[s] = -1;
            running--;
        }
    }
    return first;
}

/* ---------------------------------------------------------- the plan */

typedef struct {
    const kvv_model *m;
    const kvv_engine_opts *eo;
    bool quick;
} plan_body;

/* In the child: the plan, its status and message, raw. */
static bool plan_child(void *u, int fd)
{
    const plan_body *b = u;
    kvv_audit_plan plan;
    memset(&plan, 0, sizeof plan);
    kvv_error e = {0};
    int32_t st = (int32_t)kvv_audit_plan_engine(b->m, b->eo, b->quick, &plan, &e);
    return write_all(fd, (const unsigned char *)&st, sizeof st) &&
           write_all(fd, (const unsigned char *)e.msg, sizeof e.msg) &&
           write_all(fd, (const unsigned char *)&plan, sizeof plan);
}

kvv_status kvv_isolate_plan_engine(const kvv_model *m, const kvv_engine_opts *eo, bool quick,
                                   double timeout, kvv_audit_plan *out, kvv_error *err)
{
    plan_body body = {m, eo, quick};
    child_run cr;
    double limit = timeout > 0 ? timeout : 120.0;
    const char *name = eo && eo->name ? eo->name : "ref";
    kvv_status st = fork_run(limit, NULL, plan_child, &body, name, &cr, err);
    if (st)
        return st;
    int32_t s32;
    char msg[KVV_ERROR_MSG_MAX];
    char sig[32];
    size_t need = sizeof s32 + sizeof msg + sizeof *out;
    if (cr.got == 1 && !WIFSIGNALED(cr.status) && WEXITSTATUS(cr.status) == 0 && cr.in.n == need) {
        memcpy(&s32, cr.in.p, sizeof s32);
        memcpy(msg, cr.in.p + sizeof s32, sizeof msg);
        memcpy(out, cr.in.p + sizeof s32 + sizeof msg, sizeof *out);
        msg[sizeof msg - 1] = '\0';
        st = s32 ? kvv_error_set(err, (kvv_status)s32, "%s", msg) : KVV_OK;
    } else if (cr.got == 0) {
        st = kvv_error_set(err, KVV_ERR_ENGINE, "engine %s: opening it to plan the workload gave "
                           "no answer in %.3g s (killed; last stage: %s)", name, limit, cr.stage);
    } else if (cr.got == 1 && WIFSIGNALED(cr.status)) {
        st = kvv_error_set(err, KVV_ERR_ENGINE, "engine %s: opening it to plan the workload "
                           "crashed: %s in %s", name,
                           kvv_signal_name(WTERMSIG(cr.status), sig, sizeof sig), cr.stage);
    } else {
        st = kvv_error_set(err, cr.got < 0 ? KVV_ERR_NOMEM : KVV_ERR_ENGINE,
                           "engine %s: opening it to plan the workload: the process ended "
                           "without an answer (last stage: %s)", name, cr.stage);
    }
    free(cr.in.p);
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
    double t = 120.0 + macs / 1e7;
    /* off the CPU the device may be a software one: kvdirect of stories260K
     * took 201 s on Vulkan over lavapipe against 0.8 s on llama.cpp's CPU
     * backend, and passed 120 s + its estimate under load */
    const char *dev = o->engine.device;
    if (dev && dev[0] && strcmp(dev, "cpu") != 0)
        t *= 10;
    return t;
}

kvv_isolate_opts kvv_isolate_opts_for(const kvv_check_opts *o)
{
    return (kvv_isolate_opts){
        .timeout = o->timeout > 0 ? o->timeout : kvv_isolate_default_timeout(o),
        .stop = o->stop,
    };
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
    kvv_isolate_opts io = kvv_isolate_opts_for(o);
    check_ctx c = {o, fn};
    return kvv_isolate_run(&io, run_check, &c, r, err);
}
