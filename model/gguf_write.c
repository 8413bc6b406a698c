/*
 * gguf_write.c — deterministic GGUF writer (see gguf.h).
 *
 * Metadata is serialized as it is added (into one growing byte buffer, in
 * insertion order); tensors are copied and laid out at write time:
 *
 *   header (24 bytes) | kv section | tensor infos | zero pad to alignment |
 *   tensor 0 data | zero pad | tensor 1 data | zero pad | ...
 *
 * Each tensor's offset is the running total of the padded sizes before it,
 * so the data is contiguous in info order, as llama.cpp's gguf writer lays it
 * out and its reader requires. A file without tensors ends right after the
 * tensor-info section (no padding), like llama.cpp's vocab-only files.
 *
 * general.alignment: setting it (as uint32, a power of two) changes the
 * alignment the writer uses; a writer created with an alignment other than
 * 32 and no general.alignment key appends that key when it serializes, so
 * the reader finds the same alignment.
 */
#include "model/gguf.h"
#include "common/atomic_file.h"
#include "model/gguf_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    char *name;
    kvv_type type;
    uint32_t n_dims;
    int64_t ne[KVV_GGUF_MAX_DIMS];
    uint8_t *data;     /* owned copy, nbytes long (NULL when nbytes is 0) */
    uint64_t nbytes;
} wtensor;

struct kvv_gguf_writer {
    uint32_t version;
    uint32_t alignment;
    bool alignment_key;   /* general.alignment is among the metadata */
    uint8_t *meta;        /* serialized kv section */
    size_t meta_len, meta_cap;
    uint64_t n_kv;
    char **keys;          /* n_kv keys, for duplicate checks */
    size_t keys_cap;
    wtensor *tensors;
    uint64_t n_tensors;
    size_t tensors_cap;
};

static bool valid_alignment(uint64_t a)
{
    return a != 0 && (a & (a - 1)) == 0 && a <= KVV_GGUF_MAX_ALIGNMENT;
}

kvv_gguf_writer *kvv_gguf_writer_new(uint32_t version, uint32_t alignment)
{
    if ((version != 2 && version != 3) || !valid_alignment(alignment))
        return NULL;
    kvv_gguf_writer *w = calloc(1, sizeof *w);
    if (w) {
        w->version = version;
        w->alignment = alignment;
    }
    return w;
}

void kvv_gguf_writer_free(kvv_gguf_writer *w)
{
    if (!w)
        return;
    for (uint64_t i = 0; i < w->n_kv; i++)
        free(w->keys[i]);
    for (uint64_t i = 0; i < w->n_tensors; i++) {
        free(w->tensors[i].name);
        free(w->tensors[i].data);
    }
    free(w->keys);
    free(w->tensors);
    free(w->meta);
    free(w);
}

/* ------------------------------------------------------------- metadata */

static bool grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t n = *cap ? *cap : 16;
    while (n < need) {
        if (n > SIZE_MAX / 2 / elem)
            return false;
        n *= 2;
    }
    void *q = realloc(*p, n * elem);
    if (!q)
        return false;
    *p = q;
    *cap = n;
    return true;
}

static bool put(kvv_gguf_writer *w, const void *p, size_t n)
{
    if (n > SIZE_MAX - w->meta_len)
        return false;
    if (!grow((void **)&w->meta, &w->meta_cap, w->meta_len + n, 1))
        return false;
    if (n)
        memcpy(w->meta + w->meta_len, p, n);
    w->meta_len += n;
    return true;
}

static bool put_u32(kvv_gguf_writer *w, uint32_t v)
{
    uint8_t b[4];
    kvv_gguf_st32(b, v);
    return put(w, b, 4);
}

static bool put_u64(kvv_gguf_writer *w, uint64_t v)
{
    uint8_t b[8];
    kvv_gguf_st64(b, v);
    return put(w, b, 8);
}

static bool put_str(kvv_gguf_writer *w, const char *s, uint64_t len)
{
    return put_u64(w, len) && (len == 0 || put(w, s, (size_t)len));
}

static bool has_key(const kvv_gguf_writer *w, const char *key)
{
    for (uint64_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->keys[i], key) == 0)
            return true;
    return false;
}

/* Starts a kv: checks the key, writes key and type. *mark is where the kv
 * starts, for end_kv to roll back a failed kv. */
static kvv_status begin_kv(kvv_gguf_writer *w, const char *key, kvv_gguf_type type, size_t *mark)
{
    if (!w || !key || !*key || has_key(w, key))
        return KVV_ERR_USAGE;
    *mark = w->meta_len;
    if (!grow((void **)&w->keys, &w->keys_cap, w->n_kv + 1, sizeof *w->keys) ||
        !put_str(w, key, strlen(key)) || !put_u32(w, type))
        return KVV_ERR_NOMEM;
    return KVV_OK;
}

static kvv_status end_kv(kvv_gguf_writer *w, const char *key, kvv_status st, size_t mark)
{
    if (st == KVV_OK) {
        char *k = strdup(key);
        if (!k)
            st = KVV_ERR_NOMEM;
        else
            w->keys[w->n_kv++] = k;
    }
    if (st != KVV_OK)
        w->meta_len = mark;
    return st;
}

/* Scalar of any fixed-size type; bits holds its little-endian value. */
static kvv_status add_scalar(kvv_gguf_writer *w, const char *key, kvv_gguf_type type, uint64_t bits)
{
    size_t mark;
    bool is_align = key && strcmp(key, "general.alignment") == 0;
    if (is_align && (type != KVV_GGUF_UINT32 || !valid_alignment(bits)))
        return KVV_ERR_USAGE;
    if (type == KVV_GGUF_BOOL && bits > 1)
        return KVV_ERR_USAGE;
    kvv_status st = begin_kv(w, key, type, &mark);
    if (st)
        return st;
    uint8_t b[8];
    kvv_gguf_st64(b, bits);
    if (!put(w, b, kvv_gguf_scalar_size(type)))
        st = KVV_ERR_NOMEM;
    st = end_kv(w, key, st, mark);
    if (st == KVV_OK && is_align) {
        w->alignment = (uint32_t)bits;
        w->alignment_key = true;
    }
    return st;
}

static kvv_status add_str(kvv_gguf_writer *w, const char *key, const char *s, uint64_t len)
{
    size_t mark;
    if (key && strcmp(key, "general.alignment") == 0)
        return KVV_ERR_USAGE;
    kvv_status st = begin_kv(w, key, KVV_GGUF_STRING, &mark);
    if (st)
        return st;
    return end_kv(w, key, put_str(w, s, len) ? KVV_OK : KVV_ERR_NOMEM, mark);
}

kvv_status kvv_gguf_writer_set_u32(kvv_gguf_writer *w, const char *key, uint32_t v)
{
    return add_scalar(w, key, KVV_GGUF_UINT32, v);
}

kvv_status kvv_gguf_writer_set_i32(kvv_gguf_writer *w, const char *key, int32_t v)
{
    return add_scalar(w, key, KVV_GGUF_INT32, (uint32_t)v);
}

kvv_status kvv_gguf_writer_set_u64(kvv_gguf_writer *w, const char *key, uint64_t v)
{
    return add_scalar(w, key, KVV_GGUF_UINT64, v);
}

kvv_status kvv_gguf_writer_set_f32(kvv_gguf_writer *w, const char *key, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    return add_scalar(w, key, KVV_GGUF_FLOAT32, bits);
}

kvv_status kvv_gguf_writer_set_bool(kvv_gguf_writer *w, const char *key, bool v)
{
    return add_scalar(w, key, KVV_GGUF_BOOL, v ? 1 : 0);
}

kvv_status kvv_gguf_writer_set_str(kvv_gguf_writer *w, const char *key, const char *v)
{
    if (!v)
        return KVV_ERR_USAGE;
    return add_str(w, key, v, strlen(v));
}

kvv_status kvv_gguf_writer_set_arr(kvv_gguf_writer *w, const char *key, kvv_gguf_type elem,
                                   const void *data, uint64_t n)
{
    size_t es = kvv_gguf_scalar_size(elem), mark;
    if (es == 0 || (n && !data) || n > SIZE_MAX / es)
        return KVV_ERR_USAGE;
    if (key && strcmp(key, "general.alignment") == 0)
        return KVV_ERR_USAGE;
    if (elem == KVV_GGUF_BOOL)
        for (uint64_t i = 0; i < n; i++)
            if (((const uint8_t *)data)[i] > 1)
                return KVV_ERR_USAGE;
    kvv_status st = begin_kv(w, key, KVV_GGUF_ARRAY, &mark);
    if (st)
        return st;
    bool ok = put_u32(w, elem) && put_u64(w, n) && put(w, data, (size_t)(n * es));
    return end_kv(w, key, ok ? KVV_OK : KVV_ERR_NOMEM, mark);
}

/* String array from (ptr, len) pairs or from C strings (one of the two). */
static kvv_status add_arr_str(kvv_gguf_writer *w, const char *key, const kvv_gguf_str *strs,
                              const char *const *cstrs, uint64_t n)
{
    size_t mark;
    if ((n && !strs && !cstrs) || (key && strcmp(key, "general.alignment") == 0))
        return KVV_ERR_USAGE;
    for (uint64_t i = 0; cstrs && i < n; i++)
        if (!cstrs[i])
            return KVV_ERR_USAGE;
    kvv_status st = begin_kv(w, key, KVV_GGUF_ARRAY, &mark);
    if (st)
        return st;
    bool ok = put_u32(w, KVV_GGUF_STRING) && put_u64(w, n);
    for (uint64_t i = 0; ok && i < n; i++)
        ok = strs ? put_str(w, strs[i].ptr, strs[i].len) : put_str(w, cstrs[i], strlen(cstrs[i]));
    return end_kv(w, key, ok ? KVV_OK : KVV_ERR_NOMEM, mark);
}

kvv_status kvv_gguf_writer_set_arr_str(kvv_gguf_writer *w, const char *key,
                                       const char *const *strs, uint64_t n)
{
    return add_arr_str(w, key, NULL, strs, n);
}

kvv_status kvv_gguf_writer_copy_kv(kvv_gguf_writer *w, const kvv_gguf_kv *kv)
{
    if (!kv)
        return KVV_ERR_USAGE;
    switch (kv->type) {
    case KVV_GGUF_UINT8: case KVV_GGUF_UINT16: case KVV_GGUF_UINT32: case KVV_GGUF_UINT64:
    case KVV_GGUF_BOOL:
        return add_scalar(w, kv->key, kv->type, kv->v.u64);
    case KVV_GGUF_INT8: case KVV_GGUF_INT16: case KVV_GGUF_INT32: case KVV_GGUF_INT64:
        return add_scalar(w, kv->key, kv->type, (uint64_t)kv->v.i64);
    case KVV_GGUF_FLOAT32: {
        float f = (float)kv->v.f64;  /* exact: the reader widened a float32 */
        uint32_t bits;
        memcpy(&bits, &f, sizeof bits);
        return add_scalar(w, kv->key, kv->type, bits);
    }
    case KVV_GGUF_FLOAT64: {
        uint64_t bits;
        memcpy(&bits, &kv->v.f64, sizeof bits);
        return add_scalar(w, kv->key, kv->type, bits);
    }
    case KVV_GGUF_STRING:
        return add_str(w, kv->key, kv->v.str.ptr, kv->v.str.len);
    case KVV_GGUF_ARRAY:
        if (kv->arr_type == KVV_GGUF_STRING)
            return add_arr_str(w, kv->key, kv->arr_str, NULL, kv->arr_n);
        return kvv_gguf_writer_set_arr(w, kv->key, kv->arr_type, kv->arr_data, kv->arr_n);
    default:
        return KVV_ERR_USAGE;
    }
}

/* -------------------------------------------------------------- tensors */

kvv_status kvv_gguf_writer_add_tensor(kvv_gguf_writer *w, const char *name, kvv_type type,
                                      uint32_t n_dims, const int64_t *ne, const void *data)
{
    if (!w || !name || !ne || n_dims == 0 || n_dims > KVV_GGUF_MAX_DIMS)
        return KVV_ERR_USAGE;
    size_t len = strlen(name);
    if (len == 0 || len >= KVV_GGUF_MAX_NAME)  /* llama.cpp keeps a NUL in 64 bytes */
        return KVV_ERR_USAGE;
    for (uint64_t i = 0; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i].name, name) == 0)
            return KVV_ERR_USAGE;
    const kvv_type_traits *tt = kvv_type_traits_of(type);
    if (!tt || tt->blck_size <= 0 || tt->type_size == 0)
        return KVV_ERR_USAGE;
    wtensor t = {.type = type, .n_dims = n_dims, .ne = {1, 1, 1, 1}};
    int64_t nel = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (ne[d] < 0 || (nel != 0 && ne[d] > INT64_MAX / nel))
            return KVV_ERR_USAGE;
        t.ne[d] = ne[d];
        nel *= ne[d];
    }
    if (t.ne[0] % tt->blck_size != 0)
        return KVV_ERR_USAGE;
    uint64_t bytes = (uint64_t)(t.ne[0] / tt->blck_size);
    if (bytes > UINT64_MAX / tt->type_size)
        return KVV_ERR_USAGE;
    bytes *= tt->type_size;
    for (int d = 1; d < KVV_GGUF_MAX_DIMS; d++) {
        if (t.ne[d] != 0 && bytes > (uint64_t)INT64_MAX / (uint64_t)t.ne[d])
            return KVV_ERR_USAGE;
        bytes *= (uint64_t)t.ne[d];
    }
    if (bytes > SIZE_MAX || (bytes && !data))
        return KVV_ERR_USAGE;
    t.nbytes = bytes;
    if (!grow((void **)&w->tensors, &w->tensors_cap, w->n_tensors + 1, sizeof *w->tensors))
        return KVV_ERR_NOMEM;
    t.name = strdup(name);
    t.data = bytes ? malloc((size_t)bytes) : NULL;
    if (!t.name || (bytes && !t.data)) {
        free(t.name);
        free(t.data);
        return KVV_ERR_NOMEM;
    }
    if (bytes)
        memcpy(t.data, data, (size_t)bytes);
    w->tensors[w->n_tensors++] = t;
    return KVV_OK;
}

/* --------------------------------------------------------- serialization */

static uint64_t pad_to(uint64_t n, uint64_t a) { return (a - n % a) % a; }

/* Header, kvs, tensor infos and the padding after them, in one buffer. */
static kvv_status build_head(const kvv_gguf_writer *w, uint8_t **out, size_t *len, kvv_error *err)
{
    bool auto_align = !w->alignment_key && w->alignment != KVV_GGUF_DEFAULT_ALIGNMENT;
    kvv_gguf_writer h = {0};  /* scratch: reuse put_* on a fresh buffer */
    uint8_t hdr[24];
    kvv_gguf_st32(hdr, KVV_GGUF_MAGIC);
    kvv_gguf_st32(hdr + 4, w->version);
    kvv_gguf_st64(hdr + 8, w->n_tensors);
    kvv_gguf_st64(hdr + 16, w->n_kv + (auto_align ? 1 : 0));
    bool ok = put(&h, hdr, sizeof hdr) && put(&h, w->meta, w->meta_len);
    if (ok && auto_align) {
        static const char key[] = "general.alignment";
        ok = put_str(&h, key, sizeof key - 1) && put_u32(&h, KVV_GGUF_UINT32) &&
             put_u32(&h, w->alignment);
    }
    uint64_t off = 0;
    for (uint64_t i = 0; ok && i < w->n_tensors; i++) {
        const wtensor *t = &w->tensors[i];
        ok = put_str(&h, t->name, strlen(t->name)) && put_u32(&h, t->n_dims);
        for (uint32_t d = 0; ok && d < t->n_dims; d++)
            ok = put_u64(&h, (uint64_t)t->ne[d]);
        ok = ok && put_u32(&h, t->type) && put_u64(&h, off);
        uint64_t step = t->nbytes + pad_to(t->nbytes, w->alignment);
        if (step > UINT64_MAX - off)
            ok = false;
        off += step;
    }
    if (ok && w->n_tensors > 0) {
        static const uint8_t zeros[64];
        uint64_t pad = pad_to(h.meta_len, w->alignment);
        while (ok && pad > 0) {
            size_t n = pad < sizeof zeros ? (size_t)pad : sizeof zeros;
            ok = put(&h, zeros, n);
            pad -= n;
        }
    }
    if (!ok) {
        free(h.meta);
        return kvv_error_set(err, KVV_ERR_NOMEM, "gguf writer: out of memory");
    }
    *out = h.meta;
    *len = h.meta_len;
    return KVV_OK;
}

kvv_status kvv_gguf_writer_to_buffer(kvv_gguf_writer *w, uint8_t **buf, size_t *size,
                                     kvv_error *err)
{
    if (!w || !buf || !size)
        return kvv_error_set(err, KVV_ERR_USAGE, "gguf writer: no writer or output");
    uint8_t *head;
    size_t head_len;
    kvv_status st = build_head(w, &head, &head_len, err);
    if (st)
        return st;
    uint64_t total = head_len;
    for (uint64_t i = 0; i < w->n_tensors; i++) {
        uint64_t n = w->tensors[i].nbytes;
        n += pad_to(n, w->alignment);
        if (n > SIZE_MAX - total) {
            free(head);
            return kvv_error_set(err, KVV_ERR_NOMEM, "gguf writer: file too large for memory");
        }
        total += n;
    }
    uint8_t *out = calloc(1, total ? (size_t)total : 1);
    if (!out) {
        free(head);
        return kvv_error_set(err, KVV_ERR_NOMEM, "gguf writer: out of memory (%llu bytes)",
                             (unsigned long long)total);
    }
    memcpy(out, head, head_len);
    free(head);
    uint64_t at = head_len;
    for (uint64_t i = 0; i < w->n_tensors; i++) {
        const wtensor *t = &w->tensors[i];
        if (t->nbytes)
            memcpy(out + at, t->data, (size_t)t->nbytes);
        at += t->nbytes + pad_to(t->nbytes, w->alignment);  /* calloc'ed zeros */
    }
    *buf = out;
    *size = (size_t)total;
    return KVV_OK;
}

kvv_status kvv_gguf_writer_write(kvv_gguf_writer *w, const char *path, kvv_error *err)
{
    if (!w || !path || !*path)
        return kvv_error_set(err, KVV_ERR_USAGE, "gguf writer: no writer or output path");
    uint8_t *head;
    size_t head_len;
    kvv_status st = build_head(w, &head, &head_len, err);
    if (st)
        return st;
    /* the one output writer (common/atomic_file.h): temp + fsync + rename +
     * folder fsync for a file, written through for a device, FIFO or descriptor */
    kvv_atomic_writer *out;
    if ((st = kvv_atomic_writer_open(path, &out, err))) {
        free(head);
        return st;
    }
    st = kvv_atomic_writer_write(out, head, head_len, err);
    free(head);
    static const uint8_t zeros[256];
    for (uint64_t i = 0; !st && i < w->n_tensors; i++) {
        const wtensor *wt = &w->tensors[i];
        uint64_t pad = pad_to(wt->nbytes, w->alignment);
        st = kvv_atomic_writer_write(out, wt->data, (size_t)wt->nbytes, err);
        while (!st && pad > 0) {
            size_t n = pad < sizeof zeros ? (size_t)pad : sizeof zeros;
            st = kvv_atomic_writer_write(out, zeros, n, err);
            pad -= n;
        }
    }
    if (st) {
        kvv_atomic_writer_abort(out);
        return st;
    }
    return kvv_atomic_writer_commit(out, err);
}
