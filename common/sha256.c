/* sha256.c — SHA-256 of a file, as hex (see sha256.h). */
#include "common/sha256.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <nettle/sha2.h>

_Static_assert(SHA256_DIGEST_SIZE == KVV_SHA256_SIZE, "nettle's SHA-256 digest size");

void kvv_sha256_hex(const uint8_t digest[KVV_SHA256_SIZE], char hex[65])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < KVV_SHA256_SIZE; i++) {
        hex[2 * i] = digits[digest[i] >> 4];
        hex[2 * i + 1] = digits[digest[i] & 15];
    }
    hex[64] = '\0';
}

kvv_status kvv_sha256_file(const char *path, char hex[65], kvv_error *err)
{
    hex[0] = '\0';
    FILE *f = fopen(path, "rb");
    if (!f)
        return kvv_error_set(err, KVV_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct sha256_ctx ctx;
    sha256_init(&ctx);
    uint8_t buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        sha256_update(&ctx, n, buf);
    int bad = ferror(f);
    fclose(f);
    if (bad)
        return kvv_error_set(err, KVV_ERR_IO, "%s: read error while hashing", path);
    uint8_t d[KVV_SHA256_SIZE];
    sha256_digest(&ctx, sizeof d, d);
    kvv_sha256_hex(d, hex);
    return KVV_OK;
}
