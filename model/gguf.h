/*
 * gguf.h — strict GGUF reader and writer.
 *
 * File layout (GGUF v2 and v3; little-endian; v1 is rejected):
 *
 *   OFFSET  SIZE  TYPE      DESCRIPTION
 *   0       4     u8[4]     magic "GGUF"
 *   4       4     u32       version (2 or 3)
 *   8       8     u64       n_tensors
 *   16      8     u64       n_kv
 *   24      ...   kv[n_kv]  key: string; value type: u32; value
 *   ...     ...   ti[n]     name: string; n_dims: u32 (1..4); ne: u64[n_dims];
 *                           type: u32 (ggml type); offset: u64 (from data start)
 *   ...     pad             zero bytes to general.alignment (default 32)
 *   data    ...             tensor data; each tensor at its offset, aligned
 *
 *   string = u64 length, then that many bytes (no NUL)
 *   array  = u32 element type, u64 count, then the elements
 *
 * The reader maps the file read-only and validates everything before use:
 * every length and count against the bytes that remain, dimension products
 * against overflow, duplicate keys and tensor names, unknown value and tensor
 * types, tensor data inside the file, aligned, and not overlapping, and row
 * lengths that are multiples of the type's block size. A vocab-only file
 * (no tensors) may end without padding. Every failure is KVV_ERR_FORMAT with
 * a message "FILE: FIELD at byte OFFSET: reason".
 *
 *   kvv_gguf *g; kvv_error err = {0};
 *   if (kvv_gguf_open("m.gguf", &g, &err)) { puts(err.msg); return 2; }
 *   const kvv_gguf_kv *kv = kvv_gguf_find_kv(g, "general.architecture");
 *   const kvv_gguf_tensor *t = kvv_gguf_find_tensor(g, "token_embd.weight");
 *   kvv_gguf_close(g);
 */
#ifndef KVV_GGUF_H
#define KVV_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "model/tensor_types.h"

#define KVV_GGUF_MAX_DIMS 4
#define KVV_GGUF_DEFAULT_ALIGNMENT 32

typedef enum {
    KVV_GGUF_UINT8 = 0,
    KVV_GGUF_INT8 = 1,
    KVV_GGUF_UINT16 = 2,
    KVV_GGUF_INT16 = 3,
    KVV_GGUF_UINT32 = 4,
    KVV_GGUF_INT32 = 5,
    KVV_GGUF_FLOAT32 = 6,
    KVV_GGUF_BOOL = 7,
    KVV_GGUF_STRING = 8,
    KVV_GGUF_ARRAY = 9,
    KVV_GGUF_UINT64 = 10,
    KVV_GGUF_INT64 = 11,
    KVV_GGUF_FLOAT64 = 12,
    KVV_GGUF_TYPE_COUNT = 13
} kvv_gguf_type;

/* Name of a value type ("uint32", "array", ...) or "unknown". */
const char *kvv_gguf_type_name(uint32_t type);

/* A string inside the mapped file: not NUL-terminated. */
typedef struct {
    const char *ptr;
    uint64_t len;
} kvv_gguf_str;

/* One metadata key/value. Scalars are decoded; arrays point into the map. */
typedef struct {
    char *key;               /* NUL-terminated copy of the key */
    kvv_gguf_type type;      /* value type */
    uint64_t offset;         /* byte offset of the key's length field */
    union {
        uint64_t u64;        /* UINT8/16/32/64 and BOOL (0/1), zero-extended */
        int64_t i64;         /* INT8/16/32/64, sign-extended */
        double f64;          /* FLOAT32/FLOAT64, widened exactly */
        kvv_gguf_str str;    /* STRING */
    } v;
    /* ARRAY only: */
    kvv_gguf_type arr_type;  /* element type (never ARRAY: nested arrays are rejected) */
    uint64_t arr_n;          /* element count */
    const void *arr_data;    /* numeric elements, little-endian, packed (unaligned: memcpy) */
    kvv_gguf_str *arr_str;   /* STRING elements: arr_n entries (owned by the kvv_gguf) */
} kvv_gguf_kv;

/* One tensor info plus where its data lies. */
typedef struct {
    char *name;              /* NUL-terminated copy */
    uint32_t n_dims;         /* 1..4 */
    int64_t ne[KVV_GGUF_MAX_DIMS]; /* ne[0] = row length; unused dims are 1 */
    kvv_type type;
    uint64_t offset;         /* from the start of the data section */
    uint64_t nbytes;         /* exact size of the data */
    const uint8_t *data;     /* into the map; valid until kvv_gguf_close */
    uint64_t info_offset;    /* byte offset of this tensor info in the file */
} kvv_gguf_tensor;

typedef struct {
    char *path;              /* file name used in messages (copy) */
    uint32_t version;        /* 2 or 3 */
    uint64_t n_kv;
    kvv_gguf_kv *kv;         /* n_kv entries, in file order */
    uint64_t n_tensors;
    kvv_gguf_tensor *tensors;/* n_tensors entries, in file order */
    uint32_t alignment;      /* general.alignment or 32 */
    uint64_t data_offset;    /* file offset of the data section */
    const uint8_t *base;     /* the mapped file */
    uint64_t size;           /* file size in bytes */
    int mapped;              /* private: 1 if base must be munmap'ed */
    void *priv;              /* private: lookup tables */
} kvv_gguf;

/* Map and validate a GGUF file. On success *out owns the map; close with
 * kvv_gguf_close. On failure *out is NULL and err says why (KVV_ERR_IO or
 * KVV_ERR_FORMAT). */
kvv_status kvv_gguf_open(const char *path, kvv_gguf **out, kvv_error *err);

/* The same, over a caller's buffer (borrowed; must outlive the result).
 * name is used in messages. Used by the fuzzer. */
kvv_status kvv_gguf_open_memory(const void *buf, size_t size, const char *name,
                                kvv_gguf **out, kvv_error *err);

void kvv_gguf_close(kvv_gguf *g); /* accepts NULL */

/* An engine that has copied [p, p + n) of the mapped file into its own
 * layout: drop those pages from this process's resident set (whole pages
 * inside the range only). The map is read-only and private, so a later read
 * faults them back in from the file: nothing changes but memory. The range
 * is also made a mapping of its own, so that the kernel, when it maps a
 * whole large folio or fault-around window for a neighbouring page still
 * read in place, does not map the dropped pages back. No-op when g does not
 * map a file (kvv_gguf_open_memory) or the range is not in it. */
void kvv_gguf_drop_pages(const kvv_gguf *g, const void *p, uint64_t n);

/* Lookups; NULL if absent. Borrowed, valid until kvv_gguf_close. */
const kvv_gguf_kv *kvv_gguf_find_kv(const kvv_gguf *g, const char *key);
const kvv_gguf_tensor *kvv_gguf_find_tensor(const kvv_gguf *g, const char *name);

/* Typed getters with integer/float coercion where lossless. Each returns
 * KVV_OK and sets *out; KVV_ERR_FORMAT (message names key and offset) if the
 * key exists with an incompatible type; KVV_ERR_FORMAT with "missing" in the
 * message if absent and required, else leaves *out untouched and returns
 * KVV_OK when `required` is false. */
kvv_status kvv_gguf_get_u32(const kvv_gguf *g, const char *key, bool required, uint32_t *out, kvv_error *err);
kvv_status kvv_gguf_get_f32(const kvv_gguf *g, const char *key, bool required, float *out, kvv_error *err);
kvv_status kvv_gguf_get_bool(const kvv_gguf *g, const char *key, bool required, bool *out, kvv_error *err);
/* String as a NUL-terminated copy into buf (truncation is an error). */
kvv_status kvv_gguf_get_str(const kvv_gguf *g, const char *key, bool required, char *buf, size_t bufsize, kvv_error *err);

/* Element i of a numeric array kv as double / int64 (no bounds or type
 * check beyond i < arr_n; caller checks arr_type). */
double kvv_gguf_arr_f64(const kvv_gguf_kv *kv, uint64_t i);
int64_t kvv_gguf_arr_i64(const kvv_gguf_kv *kv, uint64_t i);

/* ---------------------------------------------------------------- writer
 *
 * Builds a file in memory order: metadata in insertion order, tensor infos in
 * insertion order, data contiguous in info order, each tensor padded to the
 * alignment with zeros. Output is byte-deterministic.
 *
 *   kvv_gguf_writer *w = kvv_gguf_writer_new(3, 32);
 *   kvv_gguf_writer_set_str(w, "general.architecture", "llama");
 *   kvv_gguf_writer_add_tensor(w, "token_embd.weight", KVV_TYPE_F32, 2, ne, bytes);
 *   kvv_gguf_writer_write(w, "out.gguf", &err);   // writes FILE.tmp, renames
 *   kvv_gguf_writer_free(w);
 */
typedef struct kvv_gguf_writer kvv_gguf_writer;

kvv_gguf_writer *kvv_gguf_writer_new(uint32_t version, uint32_t alignment); /* NULL on OOM */
void kvv_gguf_writer_free(kvv_gguf_writer *w); /* accepts NULL */

/* Metadata setters; keys must be unique (a duplicate returns KVV_ERR_USAGE). */
kvv_status kvv_gguf_writer_set_u32(kvv_gguf_writer *w, const char *key, uint32_t v);
kvv_status kvv_gguf_writer_set_i32(kvv_gguf_writer *w, const char *key, int32_t v);
kvv_status kvv_gguf_writer_set_u64(kvv_gguf_writer *w, const char *key, uint64_t v);
kvv_status kvv_gguf_writer_set_f32(kvv_gguf_writer *w, const char *key, float v);
kvv_status kvv_gguf_writer_set_bool(kvv_gguf_writer *w, const char *key, bool v);
kvv_status kvv_gguf_writer_set_str(kvv_gguf_writer *w, const char *key, const char *v);
/* Numeric array: n elements of type elem (packed little-endian bytes). */
kvv_status kvv_gguf_writer_set_arr(kvv_gguf_writer *w, const char *key, kvv_gguf_type elem,
                                   const void *data, uint64_t n);
kvv_status kvv_gguf_writer_set_arr_str(kvv_gguf_writer *w, const char *key,
                                       const char *const *strs, uint64_t n);
/* Copy one kv from a read file (any type, arrays included). */
kvv_status kvv_gguf_writer_copy_kv(kvv_gguf_writer *w, const kvv_gguf_kv *kv);

/* Tensor with ne[0..n_dims-1]; data is copied (kvv_type_row_size(type, ne0)
 * * rows bytes). */
kvv_status kvv_gguf_writer_add_tensor(kvv_gguf_writer *w, const char *name, kvv_type type,
                                      uint32_t n_dims, const int64_t *ne, const void *data);

/* Serialize to path atomically (temp file + fsync + rename beside the
 * target, symlinks followed; nothing is left behind on failure and an
 * existing file is not touched unless the write succeeds). A device, FIFO
 * or open descriptor (/dev/null, /dev/stdout, "-") is written through, as
 * common/atomic_file.h says. */
kvv_status kvv_gguf_writer_write(kvv_gguf_writer *w, const char *path, kvv_error *err);
/* Serialize to a malloc'ed buffer (caller frees). */
kvv_status kvv_gguf_writer_to_buffer(kvv_gguf_writer *w, uint8_t **buf, size_t *size, kvv_error *err);

#endif
