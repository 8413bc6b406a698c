/* kvv_file.c — see kvv_file.h (layout) and docs/vectors-format.md. */
#include "vectors/kvv_file.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "common/atomic_file.h"
#include "common/read_file.h"

/* deflate never expands data by more than 1032:1 (a 258-byte match in two
 * bits), so U > (Z + slack) * 1032 cannot be a valid stream: rejecting it
 * before allocating keeps a few hostile bytes from asking for gigabytes. */
#define KVV_ZLIB_MAX_RATIO 1032u
#define KVV_ZLIB_SLACK 64u

/* ============================================================ helpers */

const char *kvv_rec_type_name(unsigned t)
{
    switch (t) {
    case KVV_REC_BYTES: return "bytes";
    case KVV_REC_JSON:  return "json";
    case KVV_REC_I32:   return "i32";
    case KVV_REC_F32:   return "f32";
    case KVV_REC_U64:   return "u64";
    }
    return "unknown";
}

size_t kvv_rec_type_size(unsigned t)
{
    switch (t) {
    case KVV_REC_BYTES:
    case KVV_REC_JSON:  return 1;
    case KVV_REC_I32:
    case KVV_REC_F32:   return 4;
    case KVV_REC_U64:   return 8;
    }
    return 0;
}

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

static void wr16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void wr32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static void wr64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static bool name_ok(const char *s, size_t n)
{
    if (n < 1 || n > KVV_FILE_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.'))
            return false;
    }
    return true;
}

/* zlib's crc32 takes a uInt length: feed large buffers in pieces. */
static uint32_t crc_update(uint32_t crc, const uint8_t *p, uint64_t n)
{
    uLong c = crc;
    while (n > 0) {
        uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
        c = crc32(c, p, k);
        p += k;
        n -= k;
    }
    return (uint32_t)c;
}

int32_t kvv_record_i32(const kvv_record *r, uint64_t i) { return (int32_t)rd32(r->data + 4 * i); }
uint32_t kvv_record_u32(const kvv_record *r, uint64_t i) { return rd32(r->data + 4 * i); }
uint64_t kvv_record_u64(const kvv_record *r, uint64_t i) { return rd64(r->data + 8 * i); }

/* ============================================================ reader */

void kvv_file_free(kvv_file *f)
{
    if (!f)
        return;
    for (int i = 0; i < f->n_records; i++)
        free(f->records[i].data);
    free(f->records);
    free(f->path);
    free(f);
}

const kvv_record *kvv_file_find(const kvv_file *f, const char *name)
{
    for (int i = 0; f && i < f->n_records; i++)
        if (strcmp(f->records[i].name, name) == 0)
            return &f->records[i];
    return NULL;
}

#define FAIL(rec, off, ...) \
    do { bad(err, name, rec, off, __VA_ARGS__); goto fail; } while (0)

static void bad(kvv_error *err, const char *file, const char *rec, uint64_t off, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void bad(kvv_error *err, const char *file, const char *rec, uint64_t off, const char *fmt, ...)
{
    char why[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    kvv_error_set(err, KVV_ERR_FORMAT, "%s: record %s at byte %llu: %s", file, rec,
                  (unsigned long long)off, why);
}

/* Inflate exactly raw bytes from z bytes; false on any stream problem. */
static bool inflate_exact(const uint8_t *z, uint64_t zn, uint8_t *out, uint64_t raw, const char **why)
{
    z_stream s;
    memset(&s, 0, sizeof s);
    if (inflateInit(&s) != Z_OK) {
        *why = "zlib init failed";
        return false;
    }
    uint64_t zleft = zn, oleft = raw;
    s.next_in = (Bytef *)(uintptr_t)z;
    s.next_out = out;
    int rc = Z_OK;
    while (rc == Z_OK) {
        if (s.avail_in == 0 && zleft > 0) {
            s.avail_in = zleft > (1u << 30) ? (1u << 30) : (uInt)zleft;
            zleft -= s.avail_in;
        }
        if (s.avail_out == 0 && oleft > 0) {
            s.avail_out = oleft > (1u << 30) ? (1u << 30) : (uInt)oleft;
            oleft -= s.avail_out;
        }
        uInt in0 = s.avail_in, out0 = s.avail_out;
        rc = inflate(&s, Z_NO_FLUSH);
        if (rc == Z_BUF_ERROR || (rc == Z_OK && in0 == s.avail_in && out0 == s.avail_out)) {
            *why = s.avail_out == 0 && oleft == 0 ? "decompresses to more bytes than the stated size"
                                                  : "compressed data ends early";
            inflateEnd(&s);
            return false;
        }
    }
    bool ok = rc == Z_STREAM_END;
    if (!ok)
        *why = s.msg ? s.msg : "invalid zlib stream";
    else if (s.avail_in != 0 || zleft != 0) {
        ok = false;
        *why = "bytes after the end of the zlib stream";
    } else if (s.avail_out != 0 || oleft != 0) {
        ok = false;
        *why = "decompresses to fewer bytes than the stated size";
    }
    inflateEnd(&s);
    return ok;
}

kvv_status kvv_file_read_memory(const void *buf, size_t size, const char *name,
                                kvv_file **out, kvv_error *err)
{
    const uint8_t *b = buf;
    uint32_t n = 0;
    *out = NULL;
    kvv_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(name))) {
        free(f);
        return kvv_error_set(err, KVV_ERR_NOMEM, "%s: out of memory", name);
    }
    f->size = size;
    if (size < KVV_FILE_HEADER_SIZE)
        FAIL("header", 0, "file is %zu bytes, shorter than the %u-byte header (truncated)", size,
             KVV_FILE_HEADER_SIZE);
    if (memcmp(b, KVV_FILE_MAGIC, 4) != 0)
        FAIL("header", 0, "magic is not \"KVV\\x1a\": not a .kvv file");
    f->version = rd32(b + 4);
    if (f->version != KVV_FILE_VERSION)
        FAIL("header", 4, "unknown format version %u (this kvverify reads version %u)", f->version,
             KVV_FILE_VERSION);
    n = rd32(b + 8);
    if (n < 1 || n > KVV_FILE_MAX_RECORDS)
        FAIL("header", 8, "record count %u outside 1..%u", n, KVV_FILE_MAX_RECORDS);
    if (rd32(b + 12) != 0)
        FAIL("header", 12, "flags 0x%08x are not 0", rd32(b + 12));
    /* each record needs at least 2+1+4+8+8+4 bytes: bound n before allocating */
    if ((uint64_t)n * 27 > size - KVV_FILE_HEADER_SIZE)
        FAIL("header", 8, "record count %u cannot fit in the %zu bytes that follow (truncated)", n,
             size - KVV_FILE_HEADER_SIZE);
    f->records = calloc(n, sizeof *f->records);
    if (!f->records) {
        kvv_error_set(err, KVV_ERR_NOMEM, "%s: out of memory for %u records", name, n);
        goto fail;
    }

    uint64_t off = KVV_FILE_HEADER_SIZE;
    for (uint32_t i = 0; i < n; i++) {
        kvv_record *r = &f->records[i];
        char rec[KVV_FILE_NAME_MAX + 24];
        snprintf(rec, sizeof rec, "#%u", i);
        const uint64_t start = off;
        r->offset = start;
        uint64_t left = size - off;
        if (left < 2)
            FAIL(rec, off, "name length needs 2 bytes, %llu remain (truncated)", (unsigned long long)left);
        uint16_t nl = rd16(b + off);
        if (nl < 1 || nl > KVV_FILE_NAME_MAX)
            FAIL(rec, off, "name length %u outside 1..%d", nl, KVV_FILE_NAME_MAX);
        if (left - 2 < (uint64_t)nl + 4)
            FAIL(rec, off, "name of %u bytes and type fields run past the end (truncated)", nl);
        if (!name_ok((const char *)b + off + 2, nl))
            FAIL(rec, off + 2, "name has a character outside [a-z0-9_.]");
        memcpy(r->name, b + off + 2, nl);
        r->name[nl] = '\0';
        snprintf(rec, sizeof rec, "%s", r->name);
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(f->records[j].name, r->name) == 0)
                FAIL(rec, off + 2, "duplicate record name (first at byte %llu)",
                     (unsigned long long)f->records[j].offset);
        off += 2 + nl;
        unsigned type = b[off], nd = b[off + 1];
        if (type >= KVV_REC_TYPE_COUNT)
            FAIL(rec, off, "unknown element type %u", type);
        if (nd > KVV_FILE_MAX_DIMS)
            FAIL(rec, off + 1, "n_dims %u outside 0..%d", nd, KVV_FILE_MAX_DIMS);
        if (rd16(b + off + 2) != 0)
            FAIL(rec, off + 2, "reserved field is %u, not 0", rd16(b + off + 2));
        r->type = (kvv_rec_type)type;
        r->n_dims = (int)nd;
        off += 4;
        left = size - off;
        if (left < 8ull * nd + 20)
            FAIL(rec, off, "dims and sizes need %u bytes, %llu remain (truncated)", 8 * nd + 20,
                 (unsigned long long)left);
        const size_t es = kvv_rec_type_size(type);
        uint64_t prod = 1;
        for (unsigned d = 0; d < nd; d++) {
            r->dims[d] = rd64(b + off);
            if (r->dims[d] != 0 && prod > KVV_FILE_MAX_RAW / r->dims[d])
                FAIL(rec, off, "dims overflow the %llu-byte record limit",
                     (unsigned long long)KVV_FILE_MAX_RAW);
            prod *= r->dims[d];
            off += 8;
        }
        r->raw_size = rd64(b + off);
        if (r->raw_size > KVV_FILE_MAX_RAW)
            FAIL(rec, off, "uncompressed size %llu exceeds the %llu-byte limit",
                 (unsigned long long)r->raw_size, (unsigned long long)KVV_FILE_MAX_RAW);
        if (r->raw_size % es != 0)
            FAIL(rec, off, "uncompressed size %llu is not a multiple of the %s element size %zu",
                 (unsigned long long)r->raw_size, kvv_rec_type_name(type), es);
        r->n_elem = r->raw_size / es;
        if (nd > 0 && prod != r->n_elem)
            FAIL(rec, off, "dims give %llu elements, size gives %llu", (unsigned long long)prod,
                 (unsigned long long)r->n_elem);
        r->z_size = rd64(b + off + 8);
        const uint64_t crc_off = off + 16;
        r->crc = rd32(b + crc_off);
        off += 20;
        left = size - off;
        if (r->z_size > left)
            FAIL(rec, off - 12, "compressed size %llu exceeds the %llu bytes remaining (truncated)",
                 (unsigned long long)r->z_size, (unsigned long long)left);
        if (r->raw_size > (r->z_size + KVV_ZLIB_SLACK) * KVV_ZLIB_MAX_RATIO)
            FAIL(rec, off - 20, "uncompressed size %llu is impossible for %llu compressed bytes",
                 (unsigned long long)r->raw_size, (unsigned long long)r->z_size);
        r->data = malloc(r->raw_size + 1);
        if (!r->data) {
            kvv_error_set(err, KVV_ERR_NOMEM, "%s: record %s: out of memory for %llu bytes", name,
                          rec, (unsigned long long)r->raw_size);
            goto fail;
        }
        r->data[r->raw_size] = 0;
        uint32_t c = crc_update(0, b + start, crc_off - start);
        c = crc_update(c, b + off, r->z_size);
        if (c != r->crc)
            FAIL(rec, crc_off, "CRC-32 mismatch (stored 0x%08x, computed 0x%08x)", r->crc, c);
        const char *why = NULL;
        if (!inflate_exact(b + off, r->z_size, r->data, r->raw_size, &why))
            FAIL(rec, off, "zlib data: %s", why);
        off += r->z_size;
        f->n_records = (int)i + 1;
    }
    if (off != size)
        FAIL("header", 8, "the %u records announced here end at byte %llu, leaving %llu bytes after the last record",
             n, (unsigned long long)off, (unsigned long long)(size - off));
    if (strcmp(f->records[0].name, "meta") != 0 || f->records[0].type != KVV_REC_JSON)
        FAIL(f->records[0].name, f->records[0].offset, "first record must be \"meta\" of type json");
    *out = f;
    return KVV_OK;
fail:
    /* records decoded so far plus the one that failed */
    for (uint32_t i = 0; f->records && i < n && i <= (uint32_t)f->n_records; i++) {
        free(f->records[i].data);
        f->records[i].data = NULL;
    }
    f->n_records = 0;
    kvv_file_free(f);
    return err ? err->status : KVV_ERR_FORMAT;
}

kvv_status kvv_file_read(const char *path, kvv_file **out, kvv_error *err)
{
    *out = NULL;
    char *buf;
    size_t n;
    kvv_status st = kvv_read_file(path, 0, &buf, &n, err);
    if (st)
        return st;
    st = kvv_file_read_memory((const uint8_t *)buf, n, path, out, err);
    free(buf);
    return st;
}

/* ============================================================ writer */

typedef struct {
    uint8_t *head;   /* serialized record header up to and including the CRC */
    size_t head_len;
    uint8_t *z;      /* compressed payload */
    size_t z_len;
    char name[KVV_FILE_NAME_MAX + 1];
} wrec;

struct kvv_file_writer {
    wrec *recs;
    int n, cap;
};

kvv_file_writer *kvv_file_writer_new(void)
{
    return calloc(1, sizeof(kvv_file_writer));
}

void kvv_file_writer_free(kvv_file_writer *w)
{
    if (!w)
        return;
    for (int i = 0; i < w->n; i++) {
        free(w->recs[i].head);
        free(w->recs[i].z);
    }
    free(w->recs);
    free(w);
}

kvv_status kvv_file_writer_add(kvv_file_writer *w, const char *name, kvv_rec_type type,
                               int n_dims, const uint64_t *dims, const void *data,
                               size_t size, kvv_error *err)
{
    size_t nl = strlen(name);
    if (!name_ok(name, nl))
        return kvv_error_set(err, KVV_ERR_USAGE, "record name '%s': 1..%d chars of [a-z0-9_.]",
                             name, KVV_FILE_NAME_MAX);
    if ((unsigned)type >= KVV_REC_TYPE_COUNT || n_dims < 0 || n_dims > KVV_FILE_MAX_DIMS)
        return kvv_error_set(err, KVV_ERR_USAGE, "record %s: bad type or n_dims", name);
    for (int i = 0; i < w->n; i++)
        if (strcmp(w->recs[i].name, name) == 0)
            return kvv_error_set(err, KVV_ERR_USAGE, "record %s: duplicate name", name);
    if (w->n == 0 && (strcmp(name, "meta") != 0 || type != KVV_REC_JSON))
        return kvv_error_set(err, KVV_ERR_USAGE, "the first record must be \"meta\" of type json");
    if ((uint64_t)w->n >= KVV_FILE_MAX_RECORDS || (uint64_t)size > KVV_FILE_MAX_RAW)
        return kvv_error_set(err, KVV_ERR_USAGE, "record %s: too many records or too large", name);
    const size_t es = kvv_rec_type_size(type);
    if (size % es != 0)
        return kvv_error_set(err, KVV_ERR_USAGE, "record %s: %zu bytes is not a whole number of %s",
                             name, size, kvv_rec_type_name(type));
    if (n_dims > 0) {
        uint64_t prod = 1;
        for (int d = 0; d < n_dims; d++)
            prod *= dims[d];
        if (prod != size / es)
            return kvv_error_set(err, KVV_ERR_USAGE, "record %s: dims give %llu elements, data %zu",
                                 name, (unsigned long long)prod, size / es);
    }
    if (w->n == w->cap) {
        int nc = w->cap ? w->cap * 2 : 16;
        wrec *nr = realloc(w->recs, (size_t)nc * sizeof *nr);
        if (!nr)
            return kvv_error_set(err, KVV_ERR_NOMEM, "record %s: out of memory", name);
        w->recs = nr;
        w->cap = nc;
    }
    /* little-endian copy of the payload */
    uint8_t *le = malloc(size ? size : 1);
    if (!le)
        return kvv_error_set(err, KVV_ERR_NOMEM, "record %s: out of memory", name);
    const uint8_t *src = data;
    if (es == 4) {
        for (size_t i = 0; i < size; i += 4) {
            uint32_t v;
            memcpy(&v, src + i, 4);
            wr32(le + i, v);
        }
    } else if (es == 8) {
        for (size_t i = 0; i < size; i += 8) {
            uint64_t v;
            memcpy(&v, src + i, 8);
            wr64(le + i, v);
        }
    } else if (size) {
        memcpy(le, src, size);
    }
    uLong zcap = compressBound((uLong)size);
    uint8_t *z = malloc(zcap);
    size_t head_len = 2 + nl + 4 + 8 * (size_t)n_dims + 20;
    uint8_t *head = malloc(head_len);
    if (!z || !head) {
        free(le);
        free(z);
        free(head);
        return kvv_error_set(err, KVV_ERR_NOMEM, "record %s: out of memory", name);
    }
    uLongf zlen = zcap;
    int zrc = compress2(z, &zlen, le, (uLong)size, KVV_FILE_ZLIB_LEVEL);
    if (zrc != Z_OK) {
        free(le);
        free(z);
        free(head);
        return kvv_error_set(err, KVV_ERR_INTERNAL, "record %s: zlib compress2 failed (%d)", name, zrc);
    }
    uint8_t *p = head;
    wr16(p, (uint16_t)nl);
    memcpy(p + 2, name, nl);
    p += 2 + nl;
    p[0] = (uint8_t)type;
    p[1] = (uint8_t)n_dims;
    wr16(p + 2, 0);
    p += 4;
    for (int d = 0; d < n_dims; d++, p += 8)
        wr64(p, dims[d]);
    wr64(p, (uint64_t)size);
    wr64(p + 8, (uint64_t)zlen);
    uint32_t c = crc_update(0, head, (uint64_t)(p + 16 - head));
    c = crc_update(c, z, zlen);
    wr32(p + 16, c);
    free(le);
    wrec *r = &w->recs[w->n++];
    r->head = head;
    r->head_len = head_len;
    r->z = z;
    r->z_len = zlen;
    memcpy(r->name, name, nl + 1);
    return KVV_OK;
}

kvv_status kvv_file_writer_to_buffer(const kvv_file_writer *w, uint8_t **buf, size_t *size,
                                     kvv_error *err)
{
    *buf = NULL;
    *size = 0;
    if (w->n == 0)
        return kvv_error_set(err, KVV_ERR_USAGE, "a .kvv file needs at least the meta record");
    size_t total = KVV_FILE_HEADER_SIZE;
    for (int i = 0; i < w->n; i++)
        total += w->recs[i].head_len + w->recs[i].z_len;
    uint8_t *b = malloc(total);
    if (!b)
        return kvv_error_set(err, KVV_ERR_NOMEM, "out of memory for a %zu-byte .kvv file", total);
    memcpy(b, KVV_FILE_MAGIC, 4);
    wr32(b + 4, KVV_FILE_VERSION);
    wr32(b + 8, (uint32_t)w->n);
    wr32(b + 12, 0);
    size_t off = KVV_FILE_HEADER_SIZE;
    for (int i = 0; i < w->n; i++) {
        memcpy(b + off, w->recs[i].head, w->recs[i].head_len);
        off += w->recs[i].head_len;
        memcpy(b + off, w->recs[i].z, w->recs[i].z_len);
        off += w->recs[i].z_len;
    }
    *buf = b;
    *size = total;
    return KVV_OK;
}

kvv_status kvv_file_writer_write(const kvv_file_writer *w, const char *path, kvv_error *err)
{
    uint8_t *buf;
    size_t size;
    kvv_status st = kvv_file_writer_to_buffer(w, &buf, &size, err);
    if (st)
        return st;
    st = kvv_write_file_atomic(path, buf, size, err); /* PATH.tmp.PID + rename */
    free(buf);
    return st;
}
