/*
 * sha256.h — the one SHA-256 helper: a file's digest as lowercase hex, the
 * identity of a model in reports and golden vectors (nettle underneath).
 *
 *   char hex[65];
 *   if (kvv_sha256_file("model.gguf", hex, &err)) ...   // hex: 64 digits + NUL
 */
#ifndef KVV_SHA256_H
#define KVV_SHA256_H

#include <stdint.h>

#include "common/error.h"

#define KVV_SHA256_SIZE 32 /* bytes of a digest */

/* SHA-256 of the whole file at path into hex (64 lowercase hex digits and a
 * NUL; hex is "" on failure). KVV_ERR_IO naming the file when it cannot be
 * opened or read. */
kvv_status kvv_sha256_file(const char *path, char hex[65], kvv_error *err);

/* A digest as 64 lowercase hex digits and a NUL (for digests computed
 * elsewhere, e.g. the run trace's). */
void kvv_sha256_hex(const uint8_t digest[KVV_SHA256_SIZE], char hex[65]);

#endif
