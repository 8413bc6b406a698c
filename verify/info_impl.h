/* info_impl.h — what info.c (JSON) and info_text.c share. Private. */
#ifndef KVV_VERIFY_INFO_IMPL_H
#define KVV_VERIFY_INFO_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "verify/info.h"

/* Length of the valid UTF-8 sequence at s[0..n), or 0 if invalid. */
int kvv_info_utf8_len(const unsigned char *s, uint64_t n);
/* Is t an integer type (bool included) of GGUF metadata? */
bool kvv_info_is_int_type(kvv_gguf_type t);

/* Tensor count and bytes per type. */
typedef struct {
    uint64_t count[KVV_TYPE_COUNT];
    uint64_t bytes[KVV_TYPE_COUNT];
    uint64_t total;
} kvv_info_type_totals;

void kvv_info_count_types(const kvv_gguf *g, kvv_info_type_totals *tt);

#endif
