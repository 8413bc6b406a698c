/*
 * gguf_read.c — strict GGUF reader (see gguf.h for the layout and the API;
 * docs/gguf.md lists every validation rule).
 *
 * The file is treated as hostile input. A cursor walks the read-only map and
 * every read first checks the bytes that remain; counts are checked against
 * the smallest encoding they could have before anything is allocated, so a
 * small file can never make the reader allocate much more than its own size.
 * Keys and tensor names go into open-addressing hash tables (FNV-1a) that
 * serve both duplicate detection while parsing and the lookups afterwards.
 */
#include "model/gguf.h"
#include "model/gguf_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------ hash tables */

typedef struct {
    uint64_t *slot;   /* entry index + 1; 0 = empty */
    uint64_t mask;    /* capacity - 1 (capacity a power of two >= 2 * entries) */
} index_table;

typedef struct {
    index_table kv;      /* over g->kv[i].key */
    index_table tensor;  /* over g->tensors[i].name */
} lookup;

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325u;  /* FNV-1a 64 */
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 0x100000001b3u;
    }
    return h;
}

static bool table_init(index_table *t, uint64_t n)
{
    uint64_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    t->slot = calloc(cap, sizeof *t->slot);
    t->mask = cap - 1;
    return t->slot != NULL;
}

/* Probe for name; returns the slot holding it, or the empty slot where it
 * would go. names(i) gives the string of entry i. */
static uint64_t *table_probe(const index_table *t, const char *name,
                             const char *(*names)(const kvv_gguf *, uint64_t), const kvv_gguf *g)
{
    uint64_t h = hash_bytes(name, strlen(name)) & t->mask;
    for (;;) {
        uint64_t *s = &t->slot[h];
        if (*s == 0 || strcmp(names(g, *s - 1), name) == 0)
            return s;
        h = (h + 1) & t->mask;
    }
}

static const char *kv_name(const kvv_gguf *g, uint64_t i) { return g->kv[i].key; }
static const char *tensor_name(const kvv_gguf *g, uint64_t i) { return g->tensors[i].name; }

/* ---------------------------------------------------------------- cursor */

typedef struct {
    const uint8_t *base;
    uint64_t size;
    uint64_t pos;
    const char *path;
    kvv_error *err;
    char label[192];     /* field being read: "kv[3] 'general.name'" */
} cursor;

/* "FILE: LABEL SUFFIX at byte OFF: reason" */
__attribute__((format(printf, 4, 5)))
static kvv_status fail(cursor *c, const char *suffix, uint64_t off, const char *fmt, ...)
{
    char reason[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    return kvv_error_set(c->err, KVV_ERR_FORMAT, "%s: %s%s at byte %" PRIu64 ": %s",
                         c->path, c->label, suffix, off, reason);
}

static kvv_status nomem(cursor *c)
{
    return kvv_error_set(c->err, KVV_ERR_NOMEM, "%s: out of memory while reading %s",
                         c->path, c->label);
}

static uint64_t remain(const cursor *c) { return c->size - c->pos; }

static kvv_status need(cursor *c, const char *suffix, uint64_t n)
{
    if (n <= remain(c))
        return KVV_OK;
    return fail(c, suffix, c->pos, "truncated: need %" PRIu64 " bytes, %" PRIu64 " remain",
                n, remain(c));
}

static kvv_status rd_u32(cursor *c, const char *suffix, uint32_t *v)
{
    kvv_status st = need(c, suffix, 4);
    if (st)
        return st;
    *v = kvv_gguf_ld32(c->base + c->pos);
    c->pos += 4;
    return KVV_OK;
}

static kvv_status rd_u64(cursor *c, const char *suffix, uint64_t *v)
{
    kvv_status st = need(c, suffix, 8);
    if (st)
        return st;
    *v = kvv_gguf_ld64(c->base + c->pos);
    c->pos += 8;
    return KVV_OK;
}

static kvv_status rd_str(cursor *c, const char *suffix, kvv_gguf_str *s)
{
    uint64_t at = c->pos, len;
    kvv_status st = rd_u64(c, suffix, &len);
    if (st)
        return st;
    if (len > remain(c))
        return fail(c, suffix, at, "string length %" PRIu64 " exceeds the %" PRIu64
                    " bytes that remain", len, remain(c));
    s->ptr = (const char *)c->base + c->pos;
    s->len = len;
    c->pos += len;
    return KVV_OK;
}

/* A count of elements, each at least min_size bytes, must fit in what remains. */
static kvv_status check_count(cursor *c, const char *suffix, uint64_t at, uint64_t n,
                              uint64_t min_size, const char *what)
{
    if (n <= remain(c) / min_size)
        return KVV_OK;
    return fail(c, suffix, at, "%s %" PRIu64 " cannot fit in the %" PRIu64
                " bytes that remain (each needs at least %" PRIu64 ")",
                what, n, remain(c), min_size);
}

/* Printable, bounded copy of a name for messages. */
static void set_label(cursor *c, const char *kind, uint64_t i, const char *name, size_t len)
{
    int n = snprintf(c->label, sizeof c->label, "%s[%" PRIu64 "]", kind, i);
    if (!name)
        return;
    size_t at = (size_t)n, max = 64;
    c->label[at++] = ' ';
    c->label[at++] = '\'';
    for (size_t k = 0; k < len && k < max; k++) {
        unsigned char ch = (unsigned char)name[k];
        c->label[at++] = (ch >= 0x20 && ch < 0x7f && ch != '\'') ? (char)ch : '?';
    }
    if (len > max) {
        memcpy(c->label + at, "...", 3);
        at += 3;
    }
    c->label[at++] = '\'';
    c->label[at] = '\0';
}

/* Key or tensor name: non-empty, no NUL byte (the API hands out C strings). */
static kvv_status check_name(cursor *c, const char *suffix, uint64_t at, kvv_gguf_str s,
                             const char *what)
{
    if (s.len == 0)
        return fail(c, suffix, at, "empty %s", what);
    if (memchr(s.ptr, 0, s.len))
        return fail(c, suffix, at, "%s contains a NUL byte", what);
    return KVV_OK;
}

static char *copy_str(kvv_gguf_str s)
{
    char *p = malloc(s.len + 1);
    if (p) {
        memcpy(p, s.ptr, s.len);
        p[s.len] = '\0';
    }
    return p;
}

/* ------------------------------------------------------------- metadata */

/* Decode one scalar of `type` at the cursor into kv->v. */
static kvv_status rd_scalar(cursor *c, uint32_t type, kvv_gguf_kv *kv)
{
    if (type == KVV_GGUF_STRING)
        return rd_str(c, ".value", &kv->v.str);
    size_t n = kvv_gguf_scalar_size(type);
    kvv_status st = need(c, ".value", n);
    if (st)
        return st;
    const uint8_t *p = c->base + c->pos;
    switch (type) {
    case KVV_GGUF_UINT8:  kv->v.u64 = p[0]; break;
    case KVV_GGUF_INT8:   kv->v.i64 = (int8_t)p[0]; break;
    case KVV_GGUF_UINT16: kv->v.u64 = kvv_gguf_ld16(p); break;
    case KVV_GGUF_INT16:  kv->v.i64 = (int16_t)kvv_gguf_ld16(p); break;
    case KVV_GGUF_UINT32: kv->v.u64 = kvv_gguf_ld32(p); break;
    case KVV_GGUF_INT32:  kv->v.i64 = (int32_t)kvv_gguf_ld32(p); break;
    case KVV_GGUF_UINT64: kv->v.u64 = kvv_gguf_ld64(p); break;
    case KVV_GGUF_INT64:  kv->v.i64 = (int64_t)kvv_gguf_ld64(p); break;
    case KVV_GGUF_FLOAT32: {
        uint32_t bits = kvv_gguf_ld32(p);
        float f;
        memcpy(&f, &bits, sizeof f);
        kv->v.f64 = f;
        break;
    }
    case KVV_GGUF_FLOAT64: {
        uint64_t bits = kvv_gguf_ld64(p);
        memcpy(&kv->v.f64, &bits, sizeof kv->v.f64);
        break;
    }
    case KVV_GGUF_BOOL:
        if (p[0] > 1)
            return fail(c, ".value", c->pos, "bool value %u is neither 0 nor 1", p[0]);
        kv->v.u64 = p[0];
        break;
    default:
        return fail(c, ".type", c->pos, "value type %u has no scalar encoding", type);
    }
    c->pos += n;
    return KVV_OK;
}

static kvv_status rd_array(cursor *c, kvv_gguf_kv *kv)
{
    uint64_t at = c->pos;
    uint32_t et;
    uint64_t n;
    kvv_status st = rd_u32(c, ".array_type", &et);
    if (st)
        return st;
    if (et == KVV_GGUF_ARRAY)
        return fail(c, ".array_type", at, "nested arrays are not supported");
    if (et >= KVV_GGUF_TYPE_COUNT)
        return fail(c, ".array_type", at, "unknown array element type %u", et);
    at = c->pos;
    if ((st = rd_u64(c, ".array_count", &n)))
        return st;
    kv->arr_type = (kvv_gguf_type)et;
    kv->arr_n = n;
    if (et == KVV_GGUF_STRING) {
        if ((st = check_count(c, ".array_count", at, n, 8, "array count")))
            return st;
        kv->arr_str = malloc((n ? n : 1) * sizeof *kv->arr_str);
        if (!kv->arr_str)
            return nomem(c);
        for (uint64_t i = 0; i < n; i++) {
            const uint8_t *p = c->base + c->pos;
            uint64_t len = remain(c) < 8 ? 0 : kvv_gguf_ld64(p);
            if (remain(c) < 8 || len > remain(c) - 8) {
                char suffix[40];
                snprintf(suffix, sizeof suffix, "[%" PRIu64 "]", i);
                if (remain(c) < 8)
                    return need(c, suffix, 8);
                return fail(c, suffix, c->pos, "string length %" PRIu64 " exceeds the %"
                            PRIu64 " bytes that remain", len, remain(c) - 8);
            }
            kv->arr_str[i].ptr = (const char *)p + 8;
            kv->arr_str[i].len = len;
            c->pos += 8 + len;
        }
        return KVV_OK;
    }
    size_t es = kvv_gguf_scalar_size(et);
    if ((st = check_count(c, ".array_count", at, n, es, "array count")))
        return st;
    kv->arr_data = c->base + c->pos;
    if (et == KVV_GGUF_BOOL) {
        const uint8_t *b = c->base + c->pos;
        for (uint64_t i = 0; i < n; i++) {
            if (b[i] > 1) {
                char suffix[40];
                snprintf(suffix, sizeof suffix, "[%" PRIu64 "]", i);
                return fail(c, suffix, c->pos + i, "bool value %u is neither 0 nor 1", b[i]);
            }
        }
    }
    c->pos += n * es;
    return KVV_OK;
}

static kvv_status rd_kvs(cursor *c, kvv_gguf *g, lookup *lk)
{
    kvv_status st;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        kvv_gguf_kv *kv = &g->kv[i];
        kvv_gguf_str key;
        uint32_t type;
        kv->offset = c->pos;
        set_label(c, "kv", i, NULL, 0);
        if ((st = rd_str(c, ".key", &key)) || (st = check_name(c, ".key", kv->offset, key, "key")))
            return st;
        if (!(kv->key = copy_str(key)))
            return nomem(c);
        set_label(c, "kv", i, key.ptr, key.len);
        uint64_t *slot = table_probe(&lk->kv, kv->key, kv_name, g);
        if (*slot)
            return fail(c, "", kv->offset, "duplicate key (first at kv[%" PRIu64 "])", *slot - 1);
        *slot = i + 1;
        uint64_t type_at = c->pos;
        if ((st = rd_u32(c, ".type", &type)))
            return st;
        if (type >= KVV_GGUF_TYPE_COUNT)
            return fail(c, ".type", type_at, "unknown value type %u", type);
        kv->type = (kvv_gguf_type)type;
        st = type == KVV_GGUF_ARRAY ? rd_array(c, kv) : rd_scalar(c, type, kv);
        if (st)
            return st;
        if (strcmp(kv->key, "general.alignment") == 0) {
            if (type != KVV_GGUF_UINT32)
                return fail(c, ".type", type_at, "general.alignment must be uint32, not %s",
                            kvv_gguf_type_name(type));
            uint64_t a = kv->v.u64;
            if (a == 0 || (a & (a - 1)) != 0 || a > KVV_GGUF_MAX_ALIGNMENT)
                return fail(c, ".value", type_at + 4, "alignment %" PRIu64
                            " is not a power of two between 1 and %u", a, KVV_GGUF_MAX_ALIGNMENT);
            g->alignment = (uint32_t)a;
        }
    }
    return KVV_OK;
}

/* -------------------------------------------------------------- tensors */

/* a * b into *out; false on int64 overflow (a, b >= 0). */
static bool mul_i64(int64_t a, int64_t b, int64_t *out)
{
    if (a != 0 && b > INT64_MAX / a)
        return false;
    *out = a * b;
    return true;
}

static kvv_status rd_tensor_info(cursor *c, kvv_gguf *g, lookup *lk, uint64_t i)
{
    kvv_gguf_tensor *t = &g->tensors[i];
    kvv_gguf_str name;
    uint32_t n_dims, type;
    kvv_status st;
    t->info_offset = c->pos;
    set_label(c, "tensor", i, NULL, 0);
    if ((st = rd_str(c, ".name", &name)) ||
        (st = check_name(c, ".name", t->info_offset, name, "tensor name")))
        return st;
    if (name.len > KVV_GGUF_MAX_NAME)
        return fail(c, ".name", t->info_offset, "tensor name of %" PRIu64
                    " bytes is longer than GGUF's limit of %d", name.len, KVV_GGUF_MAX_NAME);
    if (!(t->name = copy_str(name)))
        return nomem(c);
    set_label(c, "tensor", i, name.ptr, name.len);
    uint64_t *slot = table_probe(&lk->tensor, t->name, tensor_name, g);
    if (*slot)
        return fail(c, "", t->info_offset, "duplicate tensor name (first at tensor[%" PRIu64 "])",
                    *slot - 1);
    *slot = i + 1;

    uint64_t at = c->pos;
    if ((st = rd_u32(c, ".n_dims", &n_dims)))
        return st;
    if (n_dims == 0 || n_dims > KVV_GGUF_MAX_DIMS)
        return fail(c, ".n_dims", at, "%u dimensions (must be 1 to %d)", n_dims, KVV_GGUF_MAX_DIMS);
    t->n_dims = n_dims;
    int64_t nel = 1;
    for (uint32_t d = 0; d < KVV_GGUF_MAX_DIMS; d++) {
        char suffix[16];
        snprintf(suffix, sizeof suffix, ".ne[%u]", d);
        uint64_t v = 1;
        at = c->pos;
        if (d < n_dims && (st = rd_u64(c, suffix, &v)))
            return st;
        if (v > (uint64_t)INT64_MAX)
            return fail(c, suffix, at, "dimension %" PRId64 " is negative", (int64_t)v);
        t->ne[d] = (int64_t)v;
        if (!mul_i64(nel, t->ne[d], &nel))
            return fail(c, suffix, at, "product of dimensions overflows int64");
    }
    at = c->pos;
    if ((st = rd_u32(c, ".type", &type)))
        return st;
    const kvv_type_traits *tt = kvv_type_traits_of(type);
    if (!tt || tt->blck_size <= 0 || tt->type_size == 0)
        return fail(c, ".type", at, "unknown tensor type %u", type);
    t->type = (kvv_type)type;
    if (t->ne[0] % tt->blck_size != 0)
        return fail(c, ".ne[0]", t->info_offset + 8 + name.len + 4,
                    "row length %" PRId64 " is not a multiple of %s's block size %" PRId64,
                    t->ne[0], tt->name, tt->blck_size);
    /* bytes = ne0 / blck * type_size * ne1 * ne2 * ne3, each step checked */
    int64_t bytes = t->ne[0] / tt->blck_size;
    bool ok = mul_i64(bytes, (int64_t)tt->type_size, &bytes);
    for (int d = 1; ok && d < KVV_GGUF_MAX_DIMS; d++)
        ok = mul_i64(bytes, t->ne[d], &bytes);
    if (!ok)
        return fail(c, ".type", at, "tensor size in bytes overflows int64");
    t->nbytes = (uint64_t)bytes;
    /* A resource claim checked where it is made: whatever later holds this
     * tensor (dequantized, copied) is sized from these dimensions, and the
     * data must be in the file anyway. */
    if (t->nbytes > c->size)
        return fail(c, ".ne", t->info_offset + 8 + name.len + 4, "%" PRId64 " elements of %s "
                    "need %" PRIu64 " bytes, more than the whole %" PRIu64 "-byte file",
                    nel, tt->name, t->nbytes, c->size);
    return rd_u64(c, ".offset", &t->offset);
}

typedef struct {
    uint64_t start, end, index;
} extent;

static int extent_cmp(const void *a, const void *b)
{
    const extent *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return x->index < y->index ? -1 : (x->index > y->index);
}

/* File offset of tensor i's `offset` field (for messages). */
static uint64_t offset_field_at(const kvv_gguf *g, uint64_t i)
{
    const kvv_gguf_tensor *t = &g->tensors[i];
    return t->info_offset + 8 + strlen(t->name) + 4 + 8 * (uint64_t)t->n_dims + 4;
}

static kvv_status place_tensors(cursor *c, kvv_gguf *g)
{
    uint64_t end_info = c->pos;
    uint64_t a = g->alignment;
    uint64_t pad = (a - end_info % a) % a;
    g->data_offset = end_info + pad;
    if (g->n_tensors == 0) {
        /* vocab-only: the (empty) data section need not be padded */
        if (g->data_offset > g->size)
            g->data_offset = g->size;
        return KVV_OK;
    }
    snprintf(c->label, sizeof c->label, "header.padding");
    if (pad > remain(c))
        return fail(c, "", end_info, "truncated: the data section starts at byte %" PRIu64
                    " but the file has %" PRIu64 " bytes", g->data_offset, g->size);
    uint64_t data_size = g->size - g->data_offset;
    extent *ex = malloc(g->n_tensors * sizeof *ex);
    if (!ex)
        return nomem(c);
    kvv_status st = KVV_OK;
    for (uint64_t i = 0; i < g->n_tensors && !st; i++) {
        kvv_gguf_tensor *t = &g->tensors[i];
        set_label(c, "tensor", i, t->name, strlen(t->name));
        uint64_t at = offset_field_at(g, i);
        if (t->offset % a != 0)
            st = fail(c, ".offset", at, "data offset %" PRIu64 " is not a multiple of the alignment %"
                      PRIu64, t->offset, a);
        else if (t->offset > data_size || t->nbytes > data_size - t->offset)
            st = fail(c, ".offset", at, "data [%" PRIu64 ", +%" PRIu64 ") lies outside the %"
                      PRIu64 "-byte data section (file offset %" PRIu64 ")",
                      t->offset, t->nbytes, data_size, g->data_offset);
        else
            t->data = g->base + g->data_offset + t->offset;
        ex[i] = (extent){t->offset, t->offset + t->nbytes, i};
    }
    if (!st) {
        qsort(ex, g->n_tensors, sizeof *ex, extent_cmp);
        for (uint64_t k = 1; k < g->n_tensors && !st; k++) {
            if (ex[k].start < ex[k - 1].end && ex[k].start < ex[k].end) {
                uint64_t i = ex[k].index, j = ex[k - 1].index;
                const kvv_gguf_tensor *t = &g->tensors[i];
                set_label(c, "tensor", i, t->name, strlen(t->name));
                st = fail(c, ".offset", offset_field_at(g, i), "data [%" PRIu64 ", %" PRIu64
                          ") overlaps tensor[%" PRIu64 "] '%s' [%" PRIu64 ", %" PRIu64 ")",
                          ex[k].start, ex[k].end, j, g->tensors[j].name, ex[k - 1].start,
                          ex[k - 1].end);
            }
        }
    }
    free(ex);
    return st;
}

/* ---------------------------------------------------------------- parse */

static kvv_status parse(cursor *c, kvv_gguf *g)
{
    kvv_status st;
    uint32_t magic, version;
    lookup *lk = g->priv;

    snprintf(c->label, sizeof c->label, "header.magic");
    if (c->size < 4)
        return need(c, "", 4);
    magic = kvv_gguf_ld32(c->base);
    if (magic != KVV_GGUF_MAGIC) {
        char shown[20];
        size_t k = 0;
        for (int i = 0; i < 4; i++) {
            unsigned char ch = c->base[i];
            if (ch >= 0x20 && ch < 0x7f && ch != '\'')
                shown[k++] = (char)ch;
            else
                k += (size_t)snprintf(shown + k, sizeof shown - k, "\\x%02x", ch);
        }
        shown[k] = '\0';
        return fail(c, "", 0, "not a GGUF file (magic '%s')", shown);
    }
    c->pos = 4;
    snprintf(c->label, sizeof c->label, "header.version");
    if ((st = rd_u32(c, "", &version)))
        return st;
    if (version == 1)
        return fail(c, "", 4, "GGUF version 1 is not supported (32-bit counts; re-convert the file)");
    if (version != 2 && version != 3) {
        if ((version & 0xffff) == 0 && (version >> 16) != 0)
            return fail(c, "", 4, "big-endian GGUF (version field %u) is not supported", version);
        return fail(c, "", 4, "GGUF version %u is not supported (only 2 and 3)", version);
    }
    g->version = version;
    snprintf(c->label, sizeof c->label, "header.n_tensors");
    if ((st = rd_u64(c, "", &g->n_tensors)))
        return st;
    snprintf(c->label, sizeof c->label, "header.n_kv");
    if ((st = rd_u64(c, "", &g->n_kv)))
        return st;
    /* smallest kv: 8-byte key length + 1-byte key + type + 1-byte value */
    if ((st = check_count(c, "", 16, g->n_kv, 14, "kv count")))
        return st;
    snprintf(c->label, sizeof c->label, "header.n_tensors");
    /* smallest tensor info: name length + 1-byte name + n_dims + ne[0] + type + offset */
    if ((st = check_count(c, "", 8, g->n_tensors, 8 + 1 + 4 + 8 + 4 + 8, "tensor count")))
        return st;
    g->kv = calloc(g->n_kv ? g->n_kv : 1, sizeof *g->kv);
    g->tensors = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *g->tensors);
    if (!g->kv || !g->tensors || !table_init(&lk->kv, g->n_kv) ||
        !table_init(&lk->tensor, g->n_tensors))
        return nomem(c);
    if ((st = rd_kvs(c, g, lk)))
        return st;
    snprintf(c->label, sizeof c->label, "header.n_tensors");
    if ((st = check_count(c, "", 8, g->n_tensors, 8 + 1 + 4 + 8 + 4 + 8, "tensor count")))
        return st;
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if ((st = rd_tensor_info(c, g, lk, i)))
            return st;
    return place_tensors(c, g);
}

static kvv_status open_buffer(const uint8_t *base, uint64_t size, const char *name, int mapped,
                              kvv_gguf **out, kvv_error *err)
{
    *out = NULL;
    kvv_gguf *g = calloc(1, sizeof *g);
    lookup *lk = calloc(1, sizeof *lk);
    char *path = strdup(name);
    if (!g || !lk || !path) {
        free(g);
        free(lk);
        free(path);
        return kvv_error_set(err, KVV_ERR_NOMEM, "%s: out of memory", name);
    }
    g->path = path;
    g->priv = lk;
    g->base = base;
    g->size = size;
    g->mapped = mapped;
    g->alignment = KVV_GGUF_DEFAULT_ALIGNMENT;
    cursor c = {.base = base, .size = size, .pos = 0, .path = path, .err = err};
    kvv_status st = parse(&c, g);
    if (st) {
        g->mapped = 0;  /* the caller unmaps on failure */
        kvv_gguf_close(g);
        return st;
    }
    *out = g;
    return KVV_OK;
}

kvv_status kvv_gguf_open_memory(const void *buf, size_t size, const char *name,
                                kvv_gguf **out, kvv_error *err)
{
    static const uint8_t empty[1];
    return open_buffer(buf ? buf : empty, buf ? size : 0, name ? name : "<memory>", 0, out, err);
}

kvv_status kvv_gguf_open(const char *path, kvv_gguf **out, kvv_error *err)
{
    static const uint8_t empty[1];
    struct stat sb;
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return kvv_error_set(err, KVV_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return kvv_error_set(err, KVV_ERR_IO, "%s: cannot read: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return kvv_error_set(err, KVV_ERR_IO, "%s: cannot read: not a regular file", path);
    }
    uint64_t size = (uint64_t)sb.st_size;
    const uint8_t *base = empty;
    if (size > 0) {
        void *m = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            int e = errno;
            close(fd);
            return kvv_error_set(err, KVV_ERR_IO, "%s: cannot map: %s", path, strerror(e));
        }
        base = m;
    }
    close(fd);
    kvv_status st = open_buffer(base, size, path, size > 0, out, err);
    if (st && size > 0)
        munmap((void *)base, (size_t)size);
    return st;
}

void kvv_gguf_drop_pages(const kvv_gguf *g, const void *p, uint64_t n)
{
    if (!g || !g->mapped || !p || n == 0)
        return;
    const uintptr_t b = (uintptr_t)g->base, e = b + (uintptr_t)g->size;
    uintptr_t lo = (uintptr_t)p, hi = lo + (uintptr_t)n;
    if (lo < b || hi > e || hi < lo)
        return;
    const long ps = sysconf(_SC_PAGESIZE);
    if (ps <= 0)
        return;
    lo = (lo + (uintptr_t)ps - 1) / (uintptr_t)ps * (uintptr_t)ps;
    hi = hi / (uintptr_t)ps * (uintptr_t)ps;
    if (hi > lo)
    {
        (void)madvise((void *)lo, hi - lo, MADV_DONTNEED); /* advice: failure changes nothing */
        /* The range also becomes its own mapping (VMA). A fault on a page
         * beside it, of a tensor still read in place, is answered by the
         * kernel with the whole large folio or fault-around window that
         * holds the page, within the VMA: without the split that mapped
         * back up to 15 MB of dropped Q4_K pages in a qwen3-0.6b Q4_K_M
         * run (docs/cpu-engine.md, "Weights"). MADV_DONTDUMP is the
         * advice that changes nothing else here: a core dump leaves out
         * private file pages anyway. */
#ifdef MADV_DONTDUMP /* Linux */
        (void)madvise((void *)lo, hi - lo, MADV_DONTDUMP);
#endif
    }
}

void kvv_gguf_close(kvv_gguf *g)
{
    if (!g)
        return;
    if (g->kv)
        for (uint64_t i = 0; i < g->n_kv; i++) {
            free(g->kv[i].key);
            free(g->kv[i].arr_str);
        }
    if (g->tensors)
        for (uint64_t i = 0; i < g->n_tensors; i++)
            free(g->tensors[i].name);
    lookup *lk = g->priv;
    if (lk) {
        free(lk->kv.slot);
        free(lk->tensor.slot);
        free(lk);
    }
    if (g->mapped)
        munmap((void *)g->base, (size_t)g->size);
    free(g->kv);
    free(g->tensors);
    free(g->path);
    free(g);
}

/* -------------------------------------------------------------- lookups */

const kvv_gguf_kv *kvv_gguf_find_kv(const kvv_gguf *g, const char *key)
{
    const lookup *lk = g ? g->priv : NULL;
    if (!lk || !key)
        return NULL;
    uint64_t *s = table_probe(&lk->kv, key, kv_name, g);
    return *s ? &g->kv[*s - 1] : NULL;
}

const kvv_gguf_tensor *kvv_gguf_find_tensor(const kvv_gguf *g, const char *name)
{
    const lookup *lk = g ? g->priv : NULL;
    if (!lk || !name)
        return NULL;
    uint64_t *s = table_probe(&lk->tensor, name, tensor_name, g);
    return *s ? &g->tensors[*s - 1] : NULL;
}
