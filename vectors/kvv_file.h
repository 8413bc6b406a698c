/*
 * kvv_file.h — the .kvv golden-vector container: a header, then named records,
 * each zlib-compressed with its uncompressed size and a CRC-32. This module
 * knows nothing about models or engines; vectors/kvv_vectors.h fills and
 * checks the records. The format is specified in docs/vectors-format.md.
 *
 * File layout (format version 1; every integer little-endian):
 *
 *   OFFSET  SIZE  TYPE     DESCRIPTION
 *   0       4     u8[4]    magic "KVV\x1a"
 *   4       4     u32      format version (1)
 *   8       4     u32      n_records (1 .. KVV_FILE_MAX_RECORDS)
 *   12      4     u32      flags (0; any other value is rejected)
 *   16      ...   record[n_records], back to back; the file ends exactly
 *                 after the last one
 *
 * One record (R = offset of the record):
 *
 *   R+0     2     u16      name length L (1 .. KVV_FILE_NAME_MAX)
 *   R+2     L     char[L]  name: [a-z0-9_.] (no NUL)
 *   R+2+L   1     u8       element type (kvv_rec_type)
 *   +1      1     u8       n_dims D (0 .. 4)
 *   +2      2     u16      reserved (0)
 *   +4      8*D   u64[D]   dims, outermost first; their product times the
 *                          element size is the uncompressed size
 *   ...     8     u64      uncompressed size U (<= KVV_FILE_MAX_RAW)
 *   ...     8     u64      compressed size Z (<= bytes remaining)
 *   ...     4     u32      CRC-32 (zlib crc32) of the record header bytes
 *                          R .. (this field) followed by the Z compressed bytes
 *                          (the zlib stream's own Adler-32 covers the U bytes)
 *   ...     Z     u8[Z]    zlib stream (compress2, level 9) of the U bytes
 *
 * The first record is "meta" of type JSON. Multi-byte elements are stored
 * little-endian; f32 elements are the exact IEEE-754 bits.
 *
 * The reader treats the file as hostile: each length is checked against the
 * bytes remaining before use, U is bounded both absolutely and by zlib's
 * maximum expansion of Z bytes (so no huge allocation comes from a few
 * bytes), the CRC must match before anything is inflated, and the stream
 * must inflate to exactly U bytes.
 * Every failure is KVV_ERR_FORMAT with "FILE: record NAME at byte OFFSET:
 * reason" (NAME is "header" for the file header).
 *
 * The writer is byte-deterministic (fixed level, no timestamps) and atomic:
 * it writes PATH.tmp.PID and renames it over PATH only when complete.
 *
 *   kvv_file_writer *w = kvv_file_writer_new();
 *   uint64_t dims[1] = {3};
 *   kvv_file_writer_add(w, "prompt", KVV_REC_I32, 1, dims, tokens, 12, &err);
 *   kvv_file_writer_write(w, "out.kvv", &err);
 *   kvv_file_writer_free(w);
 *
 *   kvv_file *f;
 *   if (kvv_file_read("out.kvv", &f, &err)) { puts(err.msg); ... }
 *   const kvv_record *r = kvv_file_find(f, "prompt");   // r->data, r->raw_size
 *   kvv_file_free(f);
 */
#ifndef KVV_FILE_H
#define KVV_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define KVV_FILE_MAGIC "KVV\x1a"
#define KVV_FILE_VERSION 1u
#define KVV_FILE_HEADER_SIZE 16u
#define KVV_FILE_NAME_MAX 63
#define KVV_FILE_MAX_DIMS 4
#define KVV_FILE_MAX_RECORDS 4096u
#define KVV_FILE_MAX_RAW (1ull << 32) /* 4 GiB per record, uncompressed */
#define KVV_FILE_ZLIB_LEVEL 9

/* Element types; the value is the stored u8. */
typedef enum {
    KVV_REC_BYTES = 0, /* opaque bytes, element size 1 */
    KVV_REC_JSON = 1,  /* UTF-8 JSON text, element size 1 */
    KVV_REC_I32 = 2,   /* int32 (token ids, counts) */
    KVV_REC_F32 = 3,   /* IEEE-754 binary32 bits */
    KVV_REC_U64 = 4,   /* uint64 (hashes, counts) */
    KVV_REC_TYPE_COUNT = 5
} kvv_rec_type;

/* "bytes", "json", "i32", "f32", "u64", or "unknown". */
const char *kvv_rec_type_name(unsigned t);
/* Element size in bytes; 0 for an unknown type. */
size_t kvv_rec_type_size(unsigned t);

/* One record as read. */
typedef struct {
    char name[KVV_FILE_NAME_MAX + 1]; /* NUL-terminated */
    kvv_rec_type type;
    int n_dims;                        /* 0..4; 0 = a flat byte/element list */
    uint64_t dims[KVV_FILE_MAX_DIMS];  /* unused dims are 0 */
    uint64_t n_elem;                   /* raw_size / element size */
    uint64_t raw_size;                 /* uncompressed bytes */
    uint64_t z_size;                   /* compressed bytes in the file */
    uint32_t crc;                      /* as stored (and verified) */
    uint64_t offset;                   /* file offset of the record */
    uint8_t *data;                     /* raw_size bytes (+1 NUL), owned by the kvv_file */
} kvv_record;

typedef struct {
    char *path;          /* name used in messages (copy) */
    uint32_t version;
    uint64_t size;       /* file size in bytes */
    int n_records;
    kvv_record *records; /* in file order; records[0] is "meta" */
} kvv_file;

/* Read and fully validate a .kvv file (all records are decompressed and their
 * CRCs checked). On success *out is owned by the caller (kvv_file_free).
 * @return KVV_OK, KVV_ERR_IO (cannot read), KVV_ERR_FORMAT (corrupt, with
 * record name and byte offset) or KVV_ERR_NOMEM; *out is NULL on failure. */
kvv_status kvv_file_read(const char *path, kvv_file **out, kvv_error *err);
/* The same over a caller's buffer (borrowed for the call only); name is used
 * in messages. Used by the fuzzer. */
kvv_status kvv_file_read_memory(const void *buf, size_t size, const char *name,
                                kvv_file **out, kvv_error *err);
void kvv_file_free(kvv_file *f); /* accepts NULL */

/* Record by name, or NULL. Borrowed, valid until kvv_file_free. */
const kvv_record *kvv_file_find(const kvv_file *f, const char *name);

/* Element i of a record (caller checks i < n_elem and the type). */
int32_t kvv_record_i32(const kvv_record *r, uint64_t i);
uint32_t kvv_record_u32(const kvv_record *r, uint64_t i); /* f32 bits or i32 as u32 */
uint64_t kvv_record_u64(const kvv_record *r, uint64_t i);

/* ------------------------------------------------------------------ writer */

typedef struct kvv_file_writer kvv_file_writer;

kvv_file_writer *kvv_file_writer_new(void); /* NULL on OOM */
void kvv_file_writer_free(kvv_file_writer *w); /* accepts NULL */

/* Append a record. name: 1..63 chars of [a-z0-9_.], unique. data holds size
 * bytes in host order; multi-byte elements are converted to little-endian
 * and compressed now (data is not kept). n_dims 0..4; when n_dims > 0 the
 * product of dims times the element size must equal size.
 * @return KVV_OK, KVV_ERR_USAGE (bad name, duplicate, shape mismatch),
 * KVV_ERR_NOMEM. */
kvv_status kvv_file_writer_add(kvv_file_writer *w, const char *name, kvv_rec_type type,
                               int n_dims, const uint64_t *dims, const void *data,
                               size_t size, kvv_error *err);

/* Serialize to a malloc'ed buffer (caller frees). */
kvv_status kvv_file_writer_to_buffer(const kvv_file_writer *w, uint8_t **buf, size_t *size,
                                     kvv_error *err);
/* Serialize to path atomically (PATH.tmp.PID then rename); on failure the
 * temp file is removed and an existing PATH is left untouched. */
kvv_status kvv_file_writer_write(const kvv_file_writer *w, const char *path, kvv_error *err);

#endif
