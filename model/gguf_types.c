/*
 * gguf_types.c — the names of GGUF value types (gguf.h). Their one home:
 * the reader (gguf_read.c) names a type in its format errors and the typed
 * getters (gguf_get.c) in theirs, so neither needs the other for it.
 */
#include "model/gguf.h"

const char *kvv_gguf_type_name(uint32_t type)
{
    static const char *const names[KVV_GGUF_TYPE_COUNT] = {
        "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
        "bool", "string", "array", "uint64", "int64", "float64",
    };
    return type < KVV_GGUF_TYPE_COUNT ? names[type] : "unknown";
}
