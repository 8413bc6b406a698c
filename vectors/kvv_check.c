/* kvv_check.c — kvverify vectors check: validate a .kvv against its model,
 * recompute every record and report the first divergence. See kvv_vectors.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/cpu_isa.h"
#include "engine/engine_registry.h"
#include "common/clock.h"
#include "common/sha256.h"
#include "vectors/kvv_meta.h"
#include "vectors/kvv_vectors_impl.h"

kvv_vectors_check_opts kvv_vectors_check_opts_default(void)
{
    kvv_vectors_check_opts o;
    memset(&o, 0, sizeof o);
    o.perturb_layer = -1;
    o.perturb_pos = -1;
    return o;
}


/* ============================================================ divergence order */

/* Where an element of a record sits in the computation; records are compared
 * in the order of this key: position, layer, kind, detail rank, index. */
typedef struct {
    int64_t k[5];
} order_key;

enum { K_RESID, K_K, K_V, K_LOGITS, K_GREEDY, K_KV, K_DONOR, K_PATCH };

typedef struct {
    int kind;       /* K_* */
    int rank;       /* 0 full tensor (has head/index), 1 hash */
} rec_class;

static bool classify(const char *name, rec_class *c)
{
    static const struct {
        const char *name;
        int kind, rank;
    } t[] = {
        {"hash.resid", K_RESID, 1}, {"full.resid", K_RESID, 0}, {"hash.k", K_K, 1},
        {"full.k", K_K, 0},         {"hash.v", K_V, 1},         {"full.v", K_V, 0},
        {"logits", K_LOGITS, 0},    {"logits.hash", K_LOGITS, 1}, {"greedy", K_GREEDY, 0},
        {"kv", K_KV, 0},            {"patch.donor", K_DONOR, 0}, {"patch", K_PATCH, 0},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (strcmp(name, t[i].name) == 0) {
            c->kind = t[i].kind;
            c->rank = t[i].rank;
            return true;
        }
    return false;
}

/* Fill d's coordinates for element i of record r and return its order key. */
static order_key locate(const kvv_vrec *r, const rec_class *c, const kvv_meta *mt, uint64_t i,
                        kvv_divergence *d)
{
    const int np = mt->n_prompt, n_pos = mt->n_prompt + mt->n_gen - 1, L = mt->n_layer;
    d->layer = d->position = d->step = d->head = d->index = -1;
    int64_t pos = n_pos, layer = L, idx = 0;
    switch (c->kind) {
    case K_RESID:
    case K_K:
    case K_V: {
        uint64_t row = c->rank ? i : i / r->dims[2];
        layer = (int64_t)(row / r->dims[1]);
        pos = (int64_t)(row % r->dims[1]);
        if (!c->rank) {
            idx = (int64_t)(i % r->dims[2]);
            int hd = c->kind == K_K ? mt->head_dim_k : c->kind == K_V ? mt->head_dim_v : 0;
            if (hd > 0) {
                d->head = (int)(idx / hd);
                d->index = (int)(idx % hd);
            } else {
                d->index = (int)idx;
            }
        }
        d->layer = (int)layer;
        d->position = (int)pos;
        break;
    }
    case K_LOGITS:
    case K_GREEDY: {
        uint64_t step = (c->kind == K_LOGITS && !c->rank) ? i / r->dims[1] : i;
        pos = np - 1 + (int64_t)step;
        d->step = (int)step;
        d->position = (int)pos;
        if (c->kind == K_LOGITS && !c->rank)
            d->index = (int)(idx = (int64_t)(i % r->dims[1]));
        break;
    }
    case K_KV:
    case K_PATCH:
        layer = (int64_t)(i / r->dims[1]);
        idx = (int64_t)(i % r->dims[1]);
        d->layer = (int)layer;
        d->index = (int)idx;
        break;
    default:
        d->index = (int)(idx = (int64_t)i);
        break;
    }
    order_key k = {{pos, layer, c->kind, c->rank, idx}};
    return k;
}

static bool key_less(const order_key *a, const order_key *b)
{
    for (int i = 0; i < 5; i++)
        if (a->k[i] != b->k[i])
            return a->k[i] < b->k[i];
    return false;
}

char *kvv_divergence_format(const kvv_divergence *d, char *buf, size_t size)
{
    static const char *const kv_cols[] = {"elements compared", "K differing (all at once)",
                                          "V differing (all at once)", "K differing (one at a time)",
                                          "V differing (one at a time)"};
    static const char *const patch_cols[] = {"logits differing from prompt A",
                                             "hash of the patched logits"};
    char where[160] = "";
    size_t o = 0;
#define ADD(...) o += (size_t)snprintf(where + o, o < sizeof where ? sizeof where - o : 0, __VA_ARGS__)
    if (d->step >= 0)
        ADD(" step %d (output layer)", d->step);
    if (d->layer >= 0)
        ADD(" layer %d", d->layer);
    if (d->position >= 0)
        ADD(" position %d", d->position);
    if (d->head >= 0)
        ADD(" head %d", d->head);
    if (strcmp(d->record, "kv") == 0 && d->index >= 0 && d->index < 5)
        ADD(" (%s)", kv_cols[d->index]);
    else if (strcmp(d->record, "patch") == 0 && d->index >= 0 && d->index < 2)
        ADD(" (%s)", patch_cols[d->index]);
    else if (d->index >= 0)
        ADD(" index %d", d->index);
#undef ADD
    if (d->is_f32) {
        float e, a;
        uint32_t eb = (uint32_t)d->expected, ab = (uint32_t)d->actual;
        memcpy(&e, &eb, 4);
        memcpy(&a, &ab, 4);
        snprintf(buf, size, "%s%s: expected 0x%08x (%.9g) actual 0x%08x (%.9g)", d->record, where,
                 eb, (double)e, ab, (double)a);
    } else if (strcmp(d->record, "greedy") == 0 || strcmp(d->record, "patch.donor") == 0) {
        snprintf(buf, size, "%s%s: expected token %lld actual token %lld", d->record, where,
                 (long long)(int32_t)d->expected, (long long)(int32_t)d->actual);
    } else if (strncmp(d->record, "hash.", 5) == 0 || strcmp(d->record, "logits.hash") == 0) {
        snprintf(buf, size, "%s%s: expected 0x%016llx actual 0x%016llx (hashes only: a vector "
                 "made with --full names the head and index)", d->record, where,
                 (unsigned long long)d->expected, (unsigned long long)d->actual);
    } else {
        snprintf(buf, size, "%s%s: expected %llu actual %llu", d->record, where,
                 (unsigned long long)d->expected, (unsigned long long)d->actual);
    }
    return buf;
}

/* ============================================================ compare */

static uint64_t host_elem(const kvv_vrec *r, uint64_t i)
{
    if (kvv_rec_type_size(r->type) == 8) {
        uint64_t v;
        memcpy(&v, (const uint8_t *)r->data + 8 * i, 8);
        return v;
    }
    uint32_t v;
    memcpy(&v, (const uint8_t *)r->data + 4 * i, 4);
    return v;
}

static kvv_status compare(const kvv_file *f, const kvv_meta *mt, const kvv_vset *set,
                          kvv_vectors_result *res, kvv_error *err)
{
    /* every stored record must be one the recomputation produced */
    for (int i = 1; i < f->n_records; i++)
        if (!kvv_vset_find(set, f->records[i].name))
            return kvv_error_set(err, KVV_ERR_FORMAT, "%s: record %s at byte %llu: not a record "
                                 "this vector's options produce", f->path, f->records[i].name,
                                 (unsigned long long)f->records[i].offset);
    order_key best = {{0}};
    for (int ri = 0; ri < set->n; ri++) {
        const kvv_vrec *c = &set->recs[ri];
        const kvv_record *s = kvv_file_find(f, c->name);
        if (!s)
            return kvv_error_set(err, KVV_ERR_FORMAT, "%s: record %s: missing (the meta record's "
                                 "options call for it)", f->path, c->name);
        bool shape = s->type == c->type && s->n_dims == c->n_dims &&
                     s->raw_size == (uint64_t)c->size;
        for (int d = 0; shape && d < c->n_dims; d++)
            shape = s->dims[d] == c->dims[d];
        if (!shape)
            return kvv_error_set(err, KVV_ERR_FORMAT, "%s: record %s at byte %llu: type or shape "
                                 "does not match what its meta record describes", f->path,
                                 c->name, (unsigned long long)s->offset);
        kvv_record_tally *t = res->n_tally < (int)(sizeof res->tally / sizeof res->tally[0])
                                  ? &res->tally[res->n_tally++] : NULL;
        if (strcmp(c->name, "prompt") == 0) {
            /* the input itself: recomputation starts from it, nothing to compare */
            if (t)
                res->n_tally--;
            continue;
        }
        rec_class cls;
        if (!classify(c->name, &cls))
            return kvv_error_set(err, KVV_ERR_INTERNAL, "record %s has no comparison order", c->name);
        const size_t es = kvv_rec_type_size(c->type);
        const uint64_t n = (uint64_t)c->size / es;
        uint64_t nd = 0;
        for (uint64_t i = 0; i < n; i++) {
            uint64_t want = es == 8 ? kvv_record_u64(s, i) : kvv_record_u32(s, i);
            uint64_t got = host_elem(c, i);
            if (want == got)
                continue;
            nd++;
            kvv_divergence d;
            memset(&d, 0, sizeof d);
            order_key k = locate(c, &cls, mt, i, &d);
            if (!res->diverged || key_less(&k, &best)) {
                snprintf(d.record, sizeof d.record, "%s", c->name);
                d.expected = want;
                d.actual = got;
                d.is_f32 = c->type == KVV_REC_F32;
                res->first = d;
                best = k;
                res->diverged = true;
            }
        }
        res->n_diverged += nd;
        if (t) {
            snprintf(t->name, sizeof t->name, "%s", c->name);
            t->compared = n;
            t->diverged = nd;
        }
    }
    return KVV_OK;
}

/* ============================================================ check */

kvv_status kvv_vectors_check(const char *model_path, const char *vec_path,
                             const kvv_vectors_check_opts *co, kvv_vectors_result *res,
                             kvv_error *err)
{
    memset(res, 0, sizeof *res);
    const double t0 = kvv_now_seconds();
    kvv_file *f = NULL;
    kvv_status st = kvv_file_read(vec_path, &f, err);
    if (st)
        return st;
    kvv_meta mt;
    if ((st = kvv_meta_parse(f, &mt, err))) {
        kvv_file_free(f);
        return st;
    }
    kvv_model *m = NULL;
    kvv_vset set = {.n = 0};
    st = kvv_sha256_file(model_path, res->model_sha256, err);
    if (!st && strcmp(res->model_sha256, mt.model_sha256) != 0)
        st = kvv_error_set(err, KVV_ERR_FORMAT, "%s: record meta at byte %llu: field model.sha256: "
                           "the vector is for %s (sha256 %.16s...), but %s has sha256 %.16s...: "
                           "wrong model", vec_path, (unsigned long long)f->records[0].offset,
                           mt.model_file, mt.model_sha256, model_path, res->model_sha256);
    if (!st)
        st = kvv_model_open(model_path, &m, err);
    if (!st) {
        const kvv_hparams *hp = &m->hp;
        if (hp->n_layer != mt.n_layer || hp->n_embd != mt.n_embd || hp->n_vocab != mt.n_vocab ||
            hp->n_head_kv * hp->head_dim != mt.kv_dim_k || hp->head_dim != mt.head_dim_k ||
            hp->n_head_kv * hp->head_dim_v != mt.kv_dim_v || hp->head_dim_v != mt.head_dim_v)
            st = kvv_error_set(err, KVV_ERR_FORMAT, "%s: record meta: model shape fields do not "
                               "match %s", vec_path, model_path);
    }
    /* bound the recomputation before running it: the sizes gen accepts, and
     * the stored greedy and hash.resid records of the announced shape */
    const kvv_record *gr = kvv_file_find(f, "greedy"), *hr = kvv_file_find(f, "hash.resid");
    const uint64_t n_pos = (uint64_t)mt.n_prompt + (uint64_t)mt.n_gen - 1;
    if (!st && (mt.n_prompt > 65536 || mt.n_gen > 65536))
        st = kvv_error_set(err, KVV_ERR_FORMAT, "%s: record meta at byte %llu: %d prompt tokens "
                           "and %d steps exceed 65536", vec_path,
                           (unsigned long long)f->records[0].offset, mt.n_prompt, mt.n_gen);
    if (!st && (!gr || gr->n_elem != (uint64_t)mt.n_gen))
        st = kvv_error_set(err, KVV_ERR_FORMAT, "%s: record greedy%s: not the %d tokens meta "
                           "announces", vec_path, gr ? "" : " (absent)", mt.n_gen);
    if (!st && (!hr || hr->n_dims != 2 || hr->dims[0] != (uint64_t)mt.n_layer + 1 ||
                hr->dims[1] != n_pos))
        st = kvv_error_set(err, KVV_ERR_FORMAT, "%s: record hash.resid%s: not the %d x %llu "
                           "hashes meta announces", vec_path, hr ? "" : " (absent)",
                           mt.n_layer + 1, (unsigned long long)n_pos);
    const kvv_record *pr = st ? NULL : kvv_file_find(f, "prompt");
    if (!st && (!pr || pr->type != KVV_REC_I32 || pr->n_elem != (uint64_t)mt.n_prompt))
        st = kvv_error_set(err, KVV_ERR_FORMAT, "%s: record prompt%s: missing, not i32, or not "
                           "the %d tokens meta announces", vec_path, pr ? "" : " (absent)",
                           mt.n_prompt);
    int32_t *toks = NULL;
    if (!st) {
        toks = malloc(sizeof(int32_t) * (size_t)mt.n_prompt);
        if (!toks)
            st = kvv_error_set(err, KVV_ERR_NOMEM, "out of memory");
        for (int i = 0; toks && i < mt.n_prompt; i++) {
            toks[i] = kvv_record_i32(pr, (uint64_t)i);
            if (toks[i] < 0 || toks[i] >= mt.n_vocab) {
                st = kvv_error_set(err, KVV_ERR_FORMAT, "%s: record prompt at byte %llu: token "
                                   "#%d = %d outside the vocabulary", vec_path,
                                   (unsigned long long)pr->offset, i, toks[i]);
                break;
            }
        }
    }
    if (!st) {
        kvv_vectors_opts o = kvv_vectors_opts_default();
        o.engine.name = co && co->engine ? co->engine : mt.engine;
        const char *mode = co && co->mode ? co->mode : NULL;
        if (!mode)
            mode = strcmp(o.engine.name, mt.engine) == 0
                       ? mt.mode
                       : kvv_mode_name(kvv_engine_default_mode(o.engine.name));
        if (strcmp(mode, "native") == 0) /* a plugin without modes: it ignores the mode */
            o.engine.mode = kvv_engine_default_mode(o.engine.name);
        else if (!kvv_mode_from_name(mode, &o.engine.mode))
            st = kvv_error_set(err, KVV_ERR_USAGE, "unknown mode '%s'", mode);
        if (co) {
            o.engine.device = co->device;
            o.engine.n_ubatch = co->n_ubatch;
            o.engine.engine_opts = co->engine_opts;
            o.engine.n_engine_opts = co->n_engine_opts;
            o.engine.isa = co->isa;
        }
        /* the cpu engine recomputes with the table the vector was made with
         * (tables differ by design); --isa chooses another */
        if (!o.engine.isa && mt.isa[0] && strcmp(o.engine.name, mt.engine) == 0) {
            kvv_cpu_isa isa;
            kvv_error ierr = {0};
            o.engine.isa = mt.isa;
            if (!st && kvv_cpu_isa_choose(mt.isa, &isa, &ierr))
                st = kvv_error_set(err, KVV_ERR_USAGE, "%s: made with the cpu engine's %s kernel "
                                   "table, which does not run here (%s); --isa picks another, "
                                   "whose bits differ by design", vec_path, mt.isa, ierr.msg);
        }
        if (!kvv_cache_type_from_name(mt.cache_type, &o.engine.cache_type))
            st = kvv_error_set(err, KVV_ERR_FORMAT, "%s: record meta: unknown cache type '%s'",
                               vec_path, mt.cache_type);
        o.engine.n_threads = co && co->n_threads > 0 ? co->n_threads : 1;
        o.engine.control = co ? co->control : 0;
        o.perturb_layer = co ? co->perturb_layer : -1;
        o.perturb_pos = co ? co->perturb_pos : -1;
        o.progress = co ? co->progress : NULL;
        o.progress_user = co ? co->progress_user : NULL;
        o.tokens = toks;
        o.n_tokens = mt.n_prompt;
        o.n_gen = mt.n_gen;
        o.full = mt.full;
        o.logits_full = mt.logits_full;
        o.patch = mt.patch;
        o.seed = mt.seed;
        if (!st)
            st = kvv_vectors_compute(m, &o, &set, &res->engine, err);
    }
    if (!st)
        st = compare(f, &mt, &set, res, err);
    res->seconds = kvv_now_seconds() - t0;
    free(toks);
    kvv_vset_free(&set);
    kvv_model_close(m);
    kvv_meta_free(&mt);
    kvv_file_free(f);
    return st;
}
