/* result.c — the result model (see report.h): check results, runs, exit
 * codes. The writers are console.c, json.c and junit.c beside it, built on
 * sbuf.c. */
#include "verify/report/report.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


const char *kvv_verdict_name(kvv_verdict v)
{
    switch (v) {
    case KVV_VERDICT_PASS: return "pass";
    case KVV_VERDICT_FAIL: return "fail";
    case KVV_VERDICT_ERROR: return "error";
    case KVV_VERDICT_SKIPPED: return "skipped";
    }
    return "error";
}

static void copy_str(char *dst, size_t size, const char *src)
{
    if (!size)
        return;
    snprintf(dst, size, "%s", src ? src : "");
}

/* "1,2,7" of n ints into buf at *off. */
static void int_list(char *buf, size_t size, size_t *off, const int *v, int n)
{
    for (int i = 0; i < n && *off < size; i++) {
        int w = snprintf(buf + *off, size - *off, "%s%d", i ? "," : "", v[i]);
        *off += w > 0 ? (size_t)w : 0;
    }
}

void kvv_workload_check_floor(kvv_workload *w)
{
    w->below_floor = w->floor_prompt > 0 &&
                     (w->n_prompt < w->floor_prompt || (w->n_gen > 0 && w->n_gen < w->floor_gen));
}

char *kvv_workload_format(const kvv_workload *w, char *buf, size_t size)
{
    size_t off = 0;
#define PUT(...)                                                             \
    do {                                                                     \
        if (off < size) {                                                    \
            int w_ = snprintf(buf + off, size - off, __VA_ARGS__);           \
            off += w_ > 0 ? (size_t)w_ : 0;                                  \
        }                                                                    \
    } while (0)
    buf[0] = '\0';
    if (w->n_batches) { /* latency: batch sizes of seeded residuals, no prompt */
        PUT("batches ");
        int_list(buf, size, &off, w->batches, w->n_batches);
        PUT(" tokens");
        if (w->repeats > 0)
            PUT(", %d repeat%s each (median)", w->repeats, w->repeats == 1 ? "" : "s");
    } else {
        PUT("prompt %d tokens", w->n_prompt);
    }
    if (w->n_gen > 0)
        PUT(", %d %s steps", w->n_gen, w->floor_prompt ? "greedy" : "decode");
    if (w->kv_chunk > 0)
        PUT(", kv chunk %d", w->kv_chunk);
    if (w->n_chunks) {
        PUT(", chunks ");
        int_list(buf, size, &off, w->chunks, w->n_chunks);
    }
    if (w->n_threads) {
        PUT(", threads ");
        int_list(buf, size, &off, w->threads, w->n_threads);
    }
    if (w->requests[0])
        PUT("; batch %s", w->requests);
    PUT("; kernel switches %s%s", strcmp(w->switches, "none") && strcmp(w->switches, "unknown")
                                      ? "at "
                                      : "",
        w->switches);
    if (strcmp(w->switches, "none") && strcmp(w->switches, "unknown"))
        PUT(" tokens");
    if (w->floor_prompt) {
        PUT("; floor prompt %d", w->floor_prompt);
        if (w->n_gen > 0)
            PUT(", %d steps", w->floor_gen);
    }
    if (w->quick)
        PUT(" — QUICK: sized to the time budget alone%s", w->below_floor ? ", below the floor" : "");
    else if (w->below_floor)
        PUT(" — below the floor (sizes given)");
#undef PUT
    if (off >= size && size > 4) /* never end inside a number */
        snprintf(buf + size - 4, 4, "...");
    return buf;
}

/* "%.9g", or "NaN", "inf", "-inf". */
static const char *value_text(float x, char *buf, size_t size)
{
    if (isnan(x))
        snprintf(buf, size, "NaN");
    else if (isinf(x))
        snprintf(buf, size, "%s", x > 0 ? "inf" : "-inf");
    else
        snprintf(buf, size, "%.9g", (double)x);
    return buf;
}

char *kvv_mismatch_format(const kvv_mismatch *m, char *buf, size_t size)
{
    char where[96] = "";
    size_t n = 0;
    const char *sep = "";
#define ADD(fmt, v)                                                                   \
    do {                                                                              \
        int w_ = snprintf(where + n, sizeof where - n, "%s" fmt, sep, v);             \
        if (w_ > 0 && (size_t)w_ < sizeof where - n)                                  \
            n += (size_t)w_;                                                          \
        sep = ",";                                                                    \
    } while (0)
    if (m->layer >= 0)
        ADD("l=%d", m->layer);
    if (m->token >= 0)
        ADD("t=%d", m->token);
    if (m->head >= 0)
        ADD("h=%d", m->head);
    if (m->index >= 0)
        ADD("i=%d", m->index);
#undef ADD
    char e[32], a[32];
    const bool nonfinite = !isfinite(m->expected) || !isfinite(m->actual);
    snprintf(buf, size, "%s[%s]%s%s: expected 0x%08x (%s) got 0x%08x (%s)%s", m->tensor, where,
             m->variant[0] ? " " : "", m->variant, (unsigned)kvv_f32_bits(m->expected),
             value_text(m->expected, e, sizeof e), (unsigned)kvv_f32_bits(m->actual),
             value_text(m->actual, a, sizeof a),
             nonfinite ? " — a NaN or inf is never equal" : "");
    return buf;
}

void kvv_check_result_init(kvv_check_result *r, const char *name)
{
    memset(r, 0, sizeof *r);
    copy_str(r->name, sizeof r->name, name);
    r->verdict = KVV_VERDICT_SKIPPED;
    r->details = json_object();
}

void kvv_check_result_free(kvv_check_result *r)
{
    if (!r)
        return;
    free(r->rows);
    free(r->controls);
    free(r->key_full);
    free(r->message_full);
    json_decref(r->details);
    r->rows = NULL;
    r->controls = NULL;
    r->details = NULL;
    r->key_full = r->message_full = NULL;
    r->n_rows = r->cap_rows = r->n_controls = r->cap_controls = 0;
}

static int grow(void **p, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return 1;
    int nc = *cap ? *cap * 2 : 16;
    while (nc < need)
        nc *= 2;
    void *q = realloc(*p, (size_t)nc * elem);
    if (!q)
        return 0;
    *p = q;
    *cap = nc;
    return 1;
}

kvv_status kvv_check_add_row(kvv_check_result *r, int layer, const char *what,
                             const kvv_cmp_stats *st)
{
    if (!grow((void **)&r->rows, &r->cap_rows, r->n_rows + 1, sizeof *r->rows))
        return KVV_ERR_NOMEM;
    kvv_layer_row *row = &r->rows[r->n_rows++];
    row->layer = layer;
    copy_str(row->what, sizeof row->what, what);
    row->st = *st;
    row->where[0] = 0;
    return KVV_OK;
}

void kvv_check_row_where(kvv_check_result *r, const char *fmt, ...)
{
    if (!r->n_rows)
        return;
    kvv_layer_row *row = &r->rows[r->n_rows - 1];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(row->where, sizeof row->where, fmt, ap);
    va_end(ap);
}

kvv_status kvv_check_add_control(kvv_check_result *r, const char *name, bool detected,
                                 const char *detail_fmt, ...)
{
    if (!grow((void **)&r->controls, &r->cap_controls, r->n_controls + 1, sizeof *r->controls))
        return KVV_ERR_NOMEM;
    kvv_control_result *c = &r->controls[r->n_controls++];
    copy_str(c->name, sizeof c->name, name);
    c->detected = detected;
    va_list ap;
    va_start(ap, detail_fmt);
    vsnprintf(c->detail, sizeof c->detail, detail_fmt, ap);
    va_end(ap);
    return KVV_OK;
}

void kvv_check_note_mismatch(kvv_check_result *r, const kvv_mismatch *m)
{
    if (r->has_mismatch)
        return;
    r->mismatch = *m;
    r->has_mismatch = true;
}

bool kvv_text_fit(char *dst, size_t size, const char *src)
{
    static const char ell[] = "\xe2\x80\xa6"; /* … */
    size_t n = strlen(src);
    if (!size)
        return n > 0;
    if (n < size) {
        memcpy(dst, src, n + 1);
        return false;
    }
    size_t limit = size > sizeof ell ? size - sizeof ell : 0; /* room for … and the NUL */
    size_t cut = limit;
    while (cut > 0 && src[cut] != ' ') /* back to a space: never inside a word */
        cut--;
    if (cut == 0) /* one long word: not inside a run of digits and letters */
        for (cut = limit; cut > 0 && isalnum((unsigned char)src[cut - 1]) &&
                          isalnum((unsigned char)src[cut]);
             cut--)
            ;
    while (cut > 0 && strchr(" ,;:(", src[cut - 1])) /* no dangling separator */
        cut--;
    while (cut > 0 && ((unsigned char)src[cut] & 0xC0) == 0x80) /* nor half a UTF-8 char */
        cut--;
    memcpy(dst, src, cut);
    memcpy(dst + cut, ell, sizeof ell); /* with its NUL */
    return true;
}

/* vsnprintf into dst[size] through kvv_text_fit, the whole text kept in
 * *full (freed and replaced; NULL when it fits). */
static void set_text(char *dst, size_t size, char **full, const char *fmt, va_list ap)
{
    va_list aq;
    va_copy(aq, ap);
    int n = vsnprintf(NULL, 0, fmt, aq);
    va_end(aq);
    char *text = n >= 0 ? malloc((size_t)n + 1) : NULL;
    free(*full);
    *full = NULL;
    if (!text) {
        vsnprintf(dst, size, fmt, ap);
        return;
    }
    vsnprintf(text, (size_t)n + 1, fmt, ap);
    if (kvv_text_fit(dst, size, text))
        *full = text;
    else
        free(text);
}

void kvv_check_set_verdict(kvv_check_result *r, kvv_verdict v, const char *key_fmt, ...)
{
    r->verdict = v;
    va_list ap;
    va_start(ap, key_fmt);
    set_text(r->key_figure, sizeof r->key_figure, &r->key_full, key_fmt, ap);
    va_end(ap);
}

const char *kvv_check_key_figure(const kvv_check_result *r)
{
    return r->key_full ? r->key_full : r->key_figure;
}

const char *kvv_check_message(const kvv_check_result *r)
{
    return r->message_full ? r->message_full : r->message;
}

void kvv_check_set_message(kvv_check_result *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_text(r->message, sizeof r->message, &r->message_full, fmt, ap);
    va_end(ap);
}

void kvv_check_set_fault(kvv_check_result *r, const char *fault, const char *detail)
{
    copy_str(r->fault, sizeof r->fault, fault);
    r->unsupported = false;
    kvv_check_set_verdict(r, KVV_VERDICT_FAIL, "%s: %s", fault, detail);
    kvv_check_set_message(r, "%s", detail);
}

void kvv_check_set_interrupted(kvv_check_result *r)
{
    kvv_check_set_verdict(r, KVV_VERDICT_ERROR, "interrupted");
    kvv_check_set_message(r, "interrupted (the run was stopped by a signal)");
    r->interrupted = true;
}

int kvv_report_count_faults(const kvv_report *rep, int *crash, int *timeout, int *contract)
{
    int n[3] = {0, 0, 0};
    for (int i = 0; i < rep->n_checks; i++) {
        const char *f = rep->checks[i].fault;
        n[0] += strcmp(f, "crash") == 0;
        n[1] += strcmp(f, "timeout") == 0;
        n[2] += strcmp(f, "contract") == 0;
    }
    if (crash)
        *crash = n[0];
    if (timeout)
        *timeout = n[1];
    if (contract)
        *contract = n[2];
    return n[0] + n[1] + n[2];
}

void kvv_check_set_error(kvv_check_result *r, const kvv_error *err)
{
    if (err && err->status == KVV_ERR_ENGINE) {
        kvv_check_set_fault(r, "contract", err->msg);
        return;
    }
    r->unsupported = err && err->status == KVV_ERR_UNSUPPORTED;
    r->verdict = r->unsupported ? KVV_VERDICT_SKIPPED : KVV_VERDICT_ERROR;
    kvv_check_set_message(r, "%s", err && err->msg[0] ? err->msg : "internal error");
    if (r->unsupported) {
        free(r->key_full); /* a figure set before the check found it could not run */
        r->key_full = NULL;
        copy_str(r->key_figure, sizeof r->key_figure, "unsupported by this engine");
    }
    else if (!r->key_figure[0])
        copy_str(r->key_figure, sizeof r->key_figure, "did not run");
}

int kvv_check_controls_missed(const kvv_check_result *r)
{
    int n = 0;
    for (int i = 0; i < r->n_controls; i++)
        n += !r->controls[i].detected;
    return n;
}

void kvv_check_set_engine(kvv_check_result *r, const kvv_engine_desc *d)
{
    r->engine = *d;
    r->has_engine = true;
}

const char *kvv_engine_desc_identity(const kvv_engine_desc *d, char *buf, size_t size)
{
    const struct { const char *label, *value; } f[] = {
        {"", d->version}, {"device ", d->device}, {"variant ", d->variant},
        {"flash attention ", d->flash_attn}};
    size_t off = 0;
    if (size)
        buf[0] = '\0';
    for (size_t i = 0; i < sizeof f / sizeof f[0] && off < size; i++) {
        if (!f[i].value[0])
            continue;
        int w = snprintf(buf + off, size - off, "%s%s%s", off ? "; " : "", f[i].label, f[i].value);
        off += w > 0 ? (size_t)w : 0;
    }
    if (d->n_ubatch > 0 && off < size)
        snprintf(buf + off, size - off, "%sn_ubatch %d", off ? "; " : "", d->n_ubatch);
    return buf;
}

/* ------------------------------------------------------------------ a run */

void kvv_report_init(kvv_report *rep, const char *model_path, uint64_t seed)
{
    memset(rep, 0, sizeof *rep);
    copy_str(rep->version, sizeof rep->version, KVV_REPORT_VERSION);
    copy_str(rep->model_path, sizeof rep->model_path, model_path);
    rep->seed = seed;
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm))
        strftime(rep->started, sizeof rep->started, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void kvv_report_free(kvv_report *rep)
{
    if (!rep)
        return;
    for (int i = 0; i < rep->n_checks; i++)
        kvv_check_result_free(&rep->checks[i]);
    free(rep->checks);
    rep->checks = NULL;
    rep->n_checks = rep->cap_checks = 0;
}

kvv_check_result *kvv_report_add(kvv_report *rep, const char *name)
{
    if (!grow((void **)&rep->checks, &rep->cap_checks, rep->n_checks + 1, sizeof *rep->checks))
        return NULL;
    kvv_check_result *r = &rep->checks[rep->n_checks++];
    kvv_check_result_init(r, name);
    return r;
}

int kvv_report_exit_code(const kvv_report *rep)
{
    if (rep->interrupted)
        return KVV_EXIT_INTERRUPTED;
    bool fail = false, error = false, passed = false;
    for (int i = 0; i < rep->n_checks; i++) {
        switch (rep->checks[i].verdict) {
        case KVV_VERDICT_PASS: passed = true; break;
        case KVV_VERDICT_FAIL: fail = true; break;
        case KVV_VERDICT_ERROR: error = true; break;
        case KVV_VERDICT_SKIPPED: break; /* could not run here: listed, not counted */
        }
    }
    if (fail)
        return KVV_EXIT_FAIL;
    if (error)
        return KVV_EXIT_BAD_INPUT;
    if (!passed)
        return KVV_EXIT_NOTHING;
    return KVV_EXIT_PASS;
}

int kvv_report_mark_unproven(kvv_report *rep)
{
    int n = 0;
    for (int i = 0; i < rep->n_checks; i++) {
        kvv_check_result *r = &rep->checks[i];
        r->unproven = rep->controls_off && r->verdict == KVV_VERDICT_PASS;
        n += r->unproven;
    }
    return n;
}

const char *kvv_report_verdict_name(const kvv_report *rep)
{
    const int code = kvv_report_exit_code(rep);
    if (code == KVV_EXIT_PASS) {
        for (int i = 0; i < rep->n_checks; i++)
            if (rep->checks[i].unproven)
                return "unproven";
        return "pass";
    }
    return code == KVV_EXIT_FAIL ? "fail" : code == KVV_EXIT_NOTHING ? "skipped" : "error";
}
