/*
 * gguf_internal.h — private helpers shared by gguf_read.c and gguf_write.c.
 *
 * Not part of the public API: little-endian loads and stores that never
 * depend on the host's byte order or alignment, the size of each scalar
 * value type, and the limits both sides enforce.
 */
#ifndef KVV_GGUF_INTERNAL_H
#define KVV_GGUF_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "model/gguf.h"

/* "GGUF" read as a little-endian u32. */
#define KVV_GGUF_MAGIC 0x46554747u

/* Longest tensor name the GGUF specification allows (bytes, no NUL).
 * llama.cpp stores names in char[GGML_MAX_NAME = 64] with a NUL, so the
 * writer keeps names one byte shorter than this. */
#define KVV_GGUF_MAX_NAME 64

/* Largest alignment the reader accepts (a sanity bound: 1 MiB). */
#define KVV_GGUF_MAX_ALIGNMENT (1u << 20)

/* Bytes of one element of a scalar value type; 0 for STRING, ARRAY and
 * unknown types (those have no fixed size). */
static inline size_t kvv_gguf_scalar_size(uint32_t type)
{
    switch (type) {
    case KVV_GGUF_UINT8: case KVV_GGUF_INT8: case KVV_GGUF_BOOL: return 1;
    case KVV_GGUF_UINT16: case KVV_GGUF_INT16: return 2;
    case KVV_GGUF_UINT32: case KVV_GGUF_INT32: case KVV_GGUF_FLOAT32: return 4;
    case KVV_GGUF_UINT64: case KVV_GGUF_INT64: case KVV_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

static inline uint16_t kvv_gguf_ld16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t kvv_gguf_ld32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline uint64_t kvv_gguf_ld64(const uint8_t *p)
{
    return (uint64_t)kvv_gguf_ld32(p) | ((uint64_t)kvv_gguf_ld32(p + 4) << 32);
}

static inline void kvv_gguf_st32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}

static inline void kvv_gguf_st64(uint8_t *p, uint64_t v)
{
    kvv_gguf_st32(p, (uint32_t)v);
    kvv_gguf_st32(p + 4, (uint32_t)(v >> 32));
}

#endif
