/*
 * plugin_guard.c — output a plugin cannot corrupt (see plugin_impl.h).
 *
 * The host never hands a plugin its own buffers. Each output goes through a
 * stage: a buffer of the declared size filled with a NaN pattern
 * (KVV_STAGE_POISON, a quiet NaN no arithmetic produces), followed by
 * KVV_PLUGIN_GUARD_FLOATS guard floats of the same pattern. After the call:
 *
 *   - a guard float changed: the plugin wrote past the declared end
 *     ("wrote past the 512 floats declared");
 *   - an output still holds the pattern: the plugin wrote less than
 *     declared ("12 of 512 values not written, first at row 0, index 500");
 *   - an output is NaN or Inf: "1 NaN and 0 Inf in 512 values, first at ...";
 *   - the stage of an earlier call changed after that call returned (it is
 *     poisoned again after every call): the plugin kept a host pointer
 *     past its call, which the ABI forbids.
 *
 * Each is KVV_ERR_ENGINE naming the call and the field. Only then are the
 * bytes copied to the caller, so nothing the caller holds is ever written by
 * the plugin directly.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/breadcrumb.h"
#include "engine/plugin/plugin_impl.h"

/* The poison: quiet NaN 0x7fc5a5a5, as little-endian bytes. */
static const unsigned char poison[4] = {0xa5, 0xa5, 0xc5, 0x7f};
#define GUARD_BYTES ((size_t)KVV_PLUGIN_GUARD_FLOATS * 4)

static void fill(unsigned char *p, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        p[i] = poison[i & 3];
}

/* First byte in [from, to) that is not the poison, or to. */
static size_t first_changed(const unsigned char *p, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        if (p[i] != poison[i & 3])
            return i;
    return to;
}

static kvv_status broke(const kvv_plugin_state *ps, kvv_error *err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static kvv_status broke(const kvv_plugin_state *ps, kvv_error *err, const char *fmt, ...)
{
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    (void)ps; /* the report names the engine; the fault "contract" says the rest */
    return kvv_error_set(err, KVV_ERR_ENGINE, "%s", what);
}

kvv_status kvv_plugin_stage_begin(kvv_plugin_state *ps, kvv_plugin_stage *s, size_t n,
                                  const char *call, const char *field, void **out,
                                  kvv_error *err)
{
    if (s->n) { /* the previous call's stage must still be poison */
        size_t at = first_changed(s->p, 0, s->n + GUARD_BYTES);
        if (at < s->n + GUARD_BYTES)
            return broke(ps, err, "%s: %s: written after the call returned (byte %zu of the "
                         "buffer an earlier %s passed): a plugin must not keep host pointers",
                         call, s->field, at, s->call);
    }
    size_t need = n + GUARD_BYTES;
    if (need > s->cap) {
        unsigned char *p = realloc(s->p, need);
        if (!p)
            return kvv_error_set(err, KVV_ERR_NOMEM, "engine %s: %s: out of memory for a %zu-byte "
                                 "staging buffer", ps->engine_name, call, need);
        s->p = p;
        s->cap = need;
    }
    fill(s->p, 0, need);
    s->n = n;
    s->call = call;
    s->field = field;
    *out = s->p;
    return KVV_OK;
}

/* "row R, index I" (or "index I") of float element i. */
static void where(size_t i, size_t row, char *buf, size_t size)
{
    if (row)
        snprintf(buf, size, "row %zu, index %zu", i / row, i % row);
    else
        snprintf(buf, size, "index %zu", i);
}

static kvv_status check_floats(const kvv_plugin_state *ps, const kvv_plugin_stage *s, size_t row,
                               kvv_error *err)
{
    size_t n = s->n / 4, unwritten = 0, nan = 0, inf = 0, first_u = n, first_bad = n;
    for (size_t i = 0; i < n; i++) {
        const unsigned char *b = s->p + 4 * i;
        if (b[0] == poison[0] && b[1] == poison[1] && b[2] == poison[2] && b[3] == poison[3]) {
            unwritten++;
            first_u = first_u < n ? first_u : i;
            continue;
        }
        float x;
        memcpy(&x, b, 4);
        if (isfinite(x))
            continue;
        nan += isnan(x) != 0;
        inf += isinf(x) != 0;
        first_bad = first_bad < n ? first_bad : i;
    }
    char at[64];
    if (unwritten) {
        where(first_u, row, at, sizeof at);
        return broke(ps, err, "%s: %s: %zu of %zu values not written (first at %s): shorter "
                     "than declared", s->call, s->field, unwritten, n, at);
    }
    if (nan || inf) {
        where(first_bad, row, at, sizeof at);
        return broke(ps, err, "%s: %s: %zu NaN and %zu Inf in %zu values (first at %s)", s->call,
                     s->field, nan, inf, n, at);
    }
    return KVV_OK;
}

kvv_status kvv_plugin_stage_end(kvv_plugin_state *ps, kvv_plugin_stage *s, kvv_stage_kind kind,
                                bool ok, size_t row, void *dst, kvv_error *err)
{
    kvv_status st = KVV_OK;
    size_t g = first_changed(s->p, s->n, s->n + GUARD_BYTES);
    if (g < s->n + GUARD_BYTES)
        st = broke(ps, err, "%s: %s: wrote past the %zu %s declared (guard byte %zu changed)",
                   s->call, s->field, kind == KVV_STAGE_FLOATS ? s->n / 4 : s->n,
                   kind == KVV_STAGE_FLOATS ? "floats" : "bytes", g - s->n);
    else if (ok && kind == KVV_STAGE_FLOATS)
        st = check_floats(ps, s, row, err);
    else if (ok && kind == KVV_STAGE_FLAGS) {
        size_t u = 0, first = s->n;
        for (size_t i = 0; i < s->n; i++)
            if (s->p[i] == poison[i & 3]) {
                u++;
                first = first < s->n ? first : i;
            }
        if (u)
            st = broke(ps, err, "%s: %s: %zu of %zu entries not written (first at %s %zu)",
                       s->call, s->field, u, s->n, row ? "row" : "index",
                       row ? first / row : first);
    }
    /* Only a successful call's output reaches dst: a failed kv_read would
     * otherwise leave the poison in the mirror as presence flags 0xa5 over
     * poison rows (found by tests/fuzz/fuzz_plugin.c). */
    if (!st && ok && dst && s->n)
        memcpy(dst, s->p, s->n);
    fill(s->p, 0, s->n + GUARD_BYTES);
    return st;
}

void kvv_plugin_stage_free(kvv_plugin_stage *s)
{
    free(s->p);
    memset(s, 0, sizeof *s);
}

/* ------------------------------------------------------------ hook relay */

/* The plugin's hook arguments are input like its buffers: the caller's
 * hooks index their own arrays by layer, rows, positions and keys (a tape
 * of n rows, a table per layer), so a plugin passing layer 7 of 3, n = -1
 * or 100 rows of a 6-token call, a position the call did not ask for or
 * unsorted keys would make the host write out of bounds (found by
 * tests/fuzz/fuzz_plugin.c). Such a call is dropped, and the forward fails
 * with KVV_ERR_ENGINE naming it. */
static bool refuse(kvv_plugin_crumb *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool refuse(kvv_plugin_crumb *c, const char *fmt, ...)
{
    if (!c->bad[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->bad, sizeof c->bad, fmt, ap);
        va_end(ap);
    }
    return false;
}

/* layer in [0, max], rows pos[0..n) strictly increasing and among the call's */
static bool rows_ok(kvv_plugin_crumb *c, const char *hook, int layer, int max, int n,
                    const int32_t *pos)
{
    if (layer < 0 || layer > max)
        return refuse(c, "forward: %s hook called for layer %d (0..%d)", hook, layer, max);
    if (n < 1 || n > c->n || !pos)
        return refuse(c, "forward: %s hook called with %d rows%s (1..%d)", hook, n,
                      pos ? "" : " and no positions", c->n);
    int j = 0;
    for (int i = 0; i < n; i++) {
        if (i > 0 && pos[i] <= pos[i - 1])
            return refuse(c, "forward: %s hook: positions not increasing (%d after %d)", hook,
                          pos[i], pos[i - 1]);
        while (j < c->n && c->pos[j] < pos[i])
            j++;
        if (j == c->n || c->pos[j] != pos[i])
            return refuse(c, "forward: %s hook: position %d is not one the call computes", hook,
                          pos[i]);
    }
    return true;
}

/* n_keys in [0, n_ctx], keys strictly increasing inside the cache */
static bool keys_ok(kvv_plugin_crumb *c, const char *hook, int n_keys, const int32_t *key_pos)
{
    if (n_keys < 0 || n_keys > c->n_ctx || (n_keys > 0 && !key_pos))
        return refuse(c, "forward: %s hook called with %d keys%s (0..%d)", hook, n_keys,
                      key_pos ? "" : " and no key positions", c->n_ctx);
    for (int j = 0; j < n_keys; j++)
        if (key_pos[j] < 0 || key_pos[j] >= c->n_ctx || (j > 0 && key_pos[j] <= key_pos[j - 1]))
            return refuse(c, "forward: %s hook: key position %d at %d (increasing, 0..%d)", hook,
                          key_pos[j], j, c->n_ctx - 1);
    return true;
}

bool kvv_plugin_crumb_rows_ok(kvv_plugin_crumb *c, const char *hook, int layer, int max, int n,
                              const int32_t *pos)
{
    return rows_ok(c, hook, layer, max, n, pos);
}

bool kvv_plugin_crumb_refuse(kvv_plugin_crumb *c, const char *msg)
{
    return refuse(c, "%s", msg);
}

static bool buf_ok(kvv_plugin_crumb *c, const char *hook, const void *p, bool needed)
{
    return p || !needed || refuse(c, "forward: %s hook called with a NULL buffer", hook);
}

static void c_residual(void *u, int layer, int n, const int32_t *pos, float *h)
{
    kvv_plugin_crumb *c = u;
    if (!rows_ok(c, "residual", layer, c->n_layer, n, pos) || !buf_ok(c, "residual", h, true))
        return;
    kvv_breadcrumb_layer(layer, pos[0], pos[n - 1]);
    c->inner.residual(c->inner.user, layer, n, pos, h);
}

static void c_kv(void *u, int layer, int n, const int32_t *pos, const float *k, const float *v)
{
    kvv_plugin_crumb *c = u;
    if (!rows_ok(c, "kv", layer, c->n_layer - 1, n, pos) || !buf_ok(c, "kv", k, true) ||
        !buf_ok(c, "kv", v, true))
        return;
    kvv_breadcrumb_layer(layer, pos[0], pos[n - 1]);
    c->inner.kv(c->inner.user, layer, n, pos, k, v);
}

static void c_attn(void *u, int layer, int n, const int32_t *pos, int n_keys,
                   const int32_t *key_pos, const float *p)
{
    kvv_plugin_crumb *c = u;
    if (!rows_ok(c, "attn", layer, c->n_layer - 1, n, pos) ||
        !keys_ok(c, "attn", n_keys, key_pos) || !buf_ok(c, "attn", p, n_keys > 0))
        return;
    kvv_breadcrumb_layer(layer, pos[0], pos[n - 1]);
    c->inner.attn(c->inner.user, layer, n, pos, n_keys, key_pos, p);
}

static void c_attn_out(void *u, int layer, int n, const int32_t *pos, const float *o)
{
    kvv_plugin_crumb *c = u;
    if (!rows_ok(c, "attn_out", layer, c->n_layer - 1, n, pos) || !buf_ok(c, "attn_out", o, true))
        return;
    kvv_breadcrumb_layer(layer, pos[0], pos[n - 1]);
    c->inner.attn_out(c->inner.user, layer, n, pos, o);
}

static void c_select(void *u, int layer, int qpos, int head, const float *q, int n_keys,
                     const int32_t *key_pos, uint8_t *keep)
{
    kvv_plugin_crumb *c = u;
    if (!rows_ok(c, "select", layer, c->n_layer - 1, 1, &qpos) ||
        !keys_ok(c, "select", n_keys, key_pos) || !buf_ok(c, "select", q, true) ||
        !buf_ok(c, "select", keep, n_keys > 0))
        return;
    if (head < 0 || head >= c->n_head) {
        refuse(c, "forward: select hook called for head %d (0..%d)", head, c->n_head - 1);
        return;
    }
    kvv_breadcrumb_layer(layer, qpos, qpos);
    c->inner.select(c->inner.user, layer, qpos, head, q, n_keys, key_pos, keep);
}

const kvv_plugin_hooks *kvv_plugin_crumb_hooks(kvv_plugin_crumb *c, const kvv_plugin_hooks *inner,
                                               const kvv_plugin_state *ps, int n_ctx, int n,
                                               const int32_t *pos)
{
    c->bad[0] = '\0';
    if (!inner)
        return NULL;
    c->inner = *inner;
    c->n_layer = ps->info.n_layer;
    c->n_head = ps->info.n_head;
    c->n_ctx = n_ctx;
    c->n = n;
    c->pos = pos;
    memset(&c->out, 0, sizeof c->out);
    c->out.struct_size = sizeof c->out;
    c->out.user = c;
    c->out.residual = inner->residual ? c_residual : NULL;
    c->out.kv = inner->kv ? c_kv : NULL;
    c->out.attn = inner->attn ? c_attn : NULL;
    c->out.attn_out = inner->attn_out ? c_attn_out : NULL;
    c->out.select = inner->select ? c_select : NULL;
    return &c->out;
}
