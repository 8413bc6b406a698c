/*
 * plugin_mirror.c — the host mirror of a plugin's KV cache (see plugin.h).
 *
 * kvverify's checks and cache policies work on a kvv_kv_cache: they read
 * rows, flip bits, evict (position, head) entries and insert recomputed
 * rows. A plugin keeps its cache to itself, so the host keeps two copies:
 * `mirror`, which callers see and edit, and `shadow`, the plugin's cache as
 * last read back. Before each forward the difference is pushed to the
 * plugin (kv_clear, kv_evict, kv_write); after it the positions the call
 * stored are read back into both (kv_read). An edit the plugin has no slot
 * for fails the forward with KVV_ERR_UNSUPPORTED instead of being ignored.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/breadcrumb.h"
#include "engine/plugin/plugin_impl.h"

static size_t esize(const kvv_kv_cache *c)
{
    return c->type == KVV_CACHE_F32 ? 4 : 2;
}

static size_t krow(const kvv_kv_cache *c)
{
    return (size_t)c->n_kv_head * (size_t)c->head_dim_k * esize(c);
}

static size_t vrow(const kvv_kv_cache *c)
{
    return (size_t)c->n_kv_head * (size_t)c->head_dim_v * esize(c);
}

static kvv_status missing(const kvv_plugin_state *ps, const char *edit, const char *cap,
                          kvv_error *err)
{
    return kvv_error_set(err, KVV_ERR_UNSUPPORTED,
                         "engine %s does not offer %s (needed to %s)", ps->engine_name, cap, edit);
}

/* Copy positions [0, n_pos) of every layer from src to dst. */
static void copy_cache(kvv_kv_cache *dst, const kvv_kv_cache *src)
{
    int np = src->n_pos > dst->n_pos ? src->n_pos : dst->n_pos;
    for (int l = 0; l < src->n_layer; l++) {
        memcpy(dst->k[l], src->k[l], (size_t)np * krow(src));
        memcpy(dst->v[l], src->v[l], (size_t)np * vrow(src));
        memcpy(dst->present[l], src->present[l], (size_t)np * (size_t)src->n_kv_head);
    }
    dst->n_pos = src->n_pos;
}

static int any_present(const kvv_kv_cache *c, int l, int p)
{
    const uint8_t *pr = c->present[l] + (size_t)p * (size_t)c->n_kv_head;
    for (int h = 0; h < c->n_kv_head; h++)
        if (pr[h])
            return 1;
    return 0;
}

static int position_empty(const kvv_kv_cache *c, int p)
{
    if (p >= c->n_pos)
        return 1;
    for (int l = 0; l < c->n_layer; l++)
        if (any_present(c, l, p))
            return 0;
    return 1;
}

/* Rows of (l, p) differ between mirror and shadow in a head live in both. */
static int rows_differ(const kvv_kv_cache *m, const kvv_kv_cache *s, int l, int p)
{
    size_t es = esize(m), hk = (size_t)m->head_dim_k * es, hv = (size_t)m->head_dim_v * es;
    const uint8_t *pm = m->present[l] + (size_t)p * (size_t)m->n_kv_head;
    const uint8_t *ps = s->present[l] + (size_t)p * (size_t)s->n_kv_head;
    const char *km = (const char *)m->k[l] + (size_t)p * krow(m);
    const char *ks = (const char *)s->k[l] + (size_t)p * krow(s);
    const char *vm = (const char *)m->v[l] + (size_t)p * vrow(m);
    const char *vs = (const char *)s->v[l] + (size_t)p * vrow(s);
    for (int h = 0; h < m->n_kv_head; h++)
        if (pm[h] && ps[h] &&
            (memcmp(km + h * hk, ks + h * hk, hk) || memcmp(vm + h * hv, vs + h * hv, hv)))
            return 1;
    return 0;
}

static kvv_status call(kvv_plugin_state *ps, int code, const char *what,
                       const kvv_plugin_error *perr, kvv_error *err)
{
    return code ? kvv_plugin_fail(ps, code, what, perr, err) : KVV_OK;
}

/* Push one layer's edits at position p: changed or inserted rows, then
 * evicted heads. */
static kvv_status push_entry(kvv_plugin_state *ps, int l, int p, kvv_error *err)
{
    kvv_kv_cache *m = ps->mirror, *s = ps->shadow;
    const kvv_plugin_table *t = &ps->lib.t;
    kvv_plugin_error perr;
    uint8_t *pm = m->present[l] + (size_t)p * (size_t)m->n_kv_head;
    uint8_t *pv = s->present[l] + (size_t)p * (size_t)s->n_kv_head;
    int inserted = 0, evicted = 0;
    for (int h = 0; h < m->n_kv_head; h++) {
        inserted |= pm[h] && !pv[h];
        evicted |= !pm[h] && pv[h];
    }
    if (inserted || rows_differ(m, s, l, p)) {
        if (!(ps->info.caps & KVV_PLUGIN_CAP_KV_WRITE))
            return missing(ps, "write changed or inserted K/V rows into its cache", "kv-write",
                           err);
        memset(&perr, 0, sizeof perr);
        kvv_status st = call(ps, t->kv_write(ps->pe, l, p, (char *)m->k[l] + (size_t)p * krow(m),
                                             (char *)m->v[l] + (size_t)p * vrow(m), &perr),
                             "kv_write", &perr, err);
        if (st)
            return st;
        memset(pv, 1, (size_t)s->n_kv_head); /* kv_write marks every head present */
        for (int h = 0; h < m->n_kv_head; h++)
            evicted |= !pm[h];
    }
    for (int h = 0; evicted && h < m->n_kv_head; h++)
        if (!pm[h] && pv[h]) {
            if (!(ps->info.caps & KVV_PLUGIN_CAP_KV_EVICT_HEAD))
                return missing(ps, "evict a single (layer, position, head) entry",
                               "kv-evict-head", err);
            memset(&perr, 0, sizeof perr);
            kvv_status st = call(ps, t->kv_evict(ps->pe, l, p, h, &perr), "kv_evict", &perr, err);
            if (st)
                return st;
        }
    return KVV_OK;
}

kvv_status kvv_plugin_mirror_push(kvv_plugin_state *ps, kvv_error *err)
{
    kvv_kv_cache *m = ps->mirror, *s = ps->shadow;
    if (!m)
        return KVV_OK;
    kvv_breadcrumb_enter(KVV_CRUMB_KV_EDIT);
    kvv_plugin_error perr;
    int np = m->n_pos > s->n_pos ? m->n_pos : s->n_pos;
    int m_empty = 1;
    for (int p = 0; p < m->n_pos && m_empty; p++)
        m_empty = position_empty(m, p);
    if (m_empty) {
        if (s->n_pos > 0) {
            memset(&perr, 0, sizeof perr);
            kvv_status st = call(ps, ps->lib.t.kv_clear(ps->pe, &perr), "kv_clear", &perr, err);
            if (st)
                return st;
            kvv_kv_cache_clear(s);
        }
        kvv_kv_cache_clear(m);
        return KVV_OK;
    }
    for (int p = 0; p < np; p++) {
        int was = !position_empty(s, p), is = !position_empty(m, p);
        if (!was && !is)
            continue;
        if (was && !is) { /* the whole position went: one eviction */
            kvv_status st = kvv_plugin_mirror_evict(ps, p, err);
            if (st)
                return st;
            continue;
        }
        for (int l = 0; l < m->n_layer; l++) {
            kvv_status st = push_entry(ps, l, p, err);
            if (st)
                return st;
        }
    }
    copy_cache(s, m);
    return KVV_OK;
}

kvv_status kvv_plugin_mirror_evict(kvv_plugin_state *ps, int p, kvv_error *err)
{
    if (!(ps->info.caps & KVV_PLUGIN_CAP_KV_EVICT))
        return missing(ps, "remove a cached position", "kv-evict", err);
    kvv_plugin_error perr;
    memset(&perr, 0, sizeof perr);
    kvv_status st = call(ps, ps->lib.t.kv_evict(ps->pe, -1, p, -1, &perr), "kv_evict", &perr, err);
    if (st)
        return st;
    for (int l = 0; l < ps->mirror->n_layer; l++) {
        kvv_kv_cache_evict(ps->mirror, l, p, -1);
        kvv_kv_cache_evict(ps->shadow, l, p, -1);
    }
    return KVV_OK;
}

/* Read positions p0..p0+n-1 of layer l into c. */
static kvv_status pull_run(kvv_plugin_state *ps, kvv_kv_cache *c, int l, int p0, int n,
                           kvv_error *err)
{
    /* through stages (plugin_guard.c): guards on k and v, every flag written */
    void *sk, *sv, *sp;
    kvv_status st;
    if ((st = kvv_plugin_stage_begin(ps, &ps->st_k, (size_t)n * krow(c), "kv_read", "k", &sk,
                                     err)) ||
        (st = kvv_plugin_stage_begin(ps, &ps->st_v, (size_t)n * vrow(c), "kv_read", "v", &sv,
                                     err)) ||
        (st = kvv_plugin_stage_begin(ps, &ps->st_present, (size_t)n * (size_t)c->n_kv_head,
                                     "kv_read", "present", &sp, err)))
        return st;
    kvv_breadcrumb_enter(KVV_CRUMB_KV_READ);
    kvv_breadcrumb_layer(l, p0, p0 + n - 1);
    kvv_plugin_error perr;
    memset(&perr, 0, sizeof perr);
    int code = ps->lib.t.kv_read(ps->pe, l, p0, n, sk, sv, sp, &perr);
    kvv_status sk_ = kvv_plugin_stage_end(ps, &ps->st_k, KVV_STAGE_RAW, code == 0, 0,
                                          kvv_kv_cache_k_ptr(c, l, p0), err);
    kvv_status sv_ = kvv_plugin_stage_end(ps, &ps->st_v, KVV_STAGE_RAW, code == 0, 0,
                                          kvv_kv_cache_v_ptr(c, l, p0), sk_ ? NULL : err);
    kvv_status sp_ = kvv_plugin_stage_end(ps, &ps->st_present, KVV_STAGE_FLAGS, code == 0,
                                          (size_t)c->n_kv_head,
                                          c->present[l] + (size_t)p0 * (size_t)c->n_kv_head,
                                          sk_ || sv_ ? NULL : err);
    if (sk_ || sv_ || sp_)
        return sk_ ? sk_ : sv_ ? sv_ : sp_;
    if (code)
        return kvv_plugin_fail(ps, code, "kv_read", &perr, err);
    for (size_t i = 0; i < (size_t)n * (size_t)c->n_kv_head; i++) /* 0/1, whatever was sent */
        c->present[l][(size_t)p0 * (size_t)c->n_kv_head + i] =
            c->present[l][(size_t)p0 * (size_t)c->n_kv_head + i] != 0;
    if (p0 + n > c->n_pos)
        c->n_pos = p0 + n;
    return KVV_OK;
}

kvv_status kvv_plugin_mirror_pull(kvv_plugin_state *ps, int n, const int32_t *pos,
                                  kvv_error *err)
{
    kvv_kv_cache *m = ps->mirror;
    if (!m)
        return KVV_OK;
    for (int i = 0; i < n;) {
        int j = i + 1; /* a run of consecutive positions */
        while (j < n && pos[j] == pos[j - 1] + 1)
            j++;
        for (int l = 0; l < m->n_layer; l++) {
            kvv_status s = pull_run(ps, m, l, pos[i], j - i, err);
            if (s)
                return s;
        }
        i = j;
    }
    /* shadow := mirror for the rows just read */
    for (int i = 0; i < n; i++)
        for (int l = 0; l < m->n_layer; l++) {
            memcpy(kvv_kv_cache_k_ptr(ps->shadow, l, pos[i]), kvv_kv_cache_k_ptr(m, l, pos[i]),
                   krow(m));
            memcpy(kvv_kv_cache_v_ptr(ps->shadow, l, pos[i]), kvv_kv_cache_v_ptr(m, l, pos[i]),
                   vrow(m));
            memcpy(ps->shadow->present[l] + (size_t)pos[i] * (size_t)m->n_kv_head,
                   m->present[l] + (size_t)pos[i] * (size_t)m->n_kv_head, (size_t)m->n_kv_head);
        }
    if (m->n_pos > ps->shadow->n_pos)
        ps->shadow->n_pos = m->n_pos;
    return KVV_OK;
}
