/*
 * runtime.c — names of the KV cache storage types (runtime/runtime.h).
 */
#include <string.h>

#include "runtime/runtime.h"

static const char *const cache_type_names[] = {"f32", "f16", "bf16"};
#define N_CACHE_TYPES (sizeof cache_type_names / sizeof cache_type_names[0])

const char *kvv_cache_type_name(kvv_cache_type t)
{
    if ((unsigned)t < N_CACHE_TYPES)
        return cache_type_names[t];
    return "unknown";
}

int kvv_cache_type_from_name(const char *s, kvv_cache_type *out)
{
    for (unsigned i = 0; s && i < N_CACHE_TYPES; i++)
        if (strcmp(s, cache_type_names[i]) == 0) {
            *out = (kvv_cache_type)i;
            return 1;
        }
    return 0;
}
