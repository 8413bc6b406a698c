/*
 * fuzzed_plugin.h — shared by tests/fuzz/fuzz_plugin.c and the plugin it
 * loads (fuzzed_plugin.c): the one extra symbol the plugin exports, through
 * which the fuzz target hands it, before each input, the model's true
 * dimensions and the bytes that script everything the plugin does.
 */
#ifndef KVV_FUZZED_PLUGIN_H
#define KVV_FUZZED_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

/* The model as kvverify reads it (a well-behaved plugin reports these). */
typedef struct {
    int n_layer, n_embd, n_head, n_head_kv, head_dim, head_dim_v, n_vocab;
} kvv_fuzz_dims;

/* Script the plugin: data[size] is read byte by byte at each decision the
 * plugin makes (the table, open, every call); byte 0 or the end of the
 * script means "behave". data is borrowed until the next call. */
typedef void (*kvv_fuzz_script_fn)(const kvv_fuzz_dims *d, const uint8_t *data, size_t size);
#define KVV_FUZZ_SCRIPT_SYMBOL "kvv_fuzz_plugin_script"

#endif
