/*
 * kvv_meta.h — the "meta" record of a .kvv file: what was computed, by whom,
 * from which model. JSON (jansson), written with sorted keys and no
 * whitespace so the bytes depend only on the values. Field list and meaning:
 * docs/vectors-format.md, "The meta record".
 *
 *   kvv_meta m; kvv_meta_init(&m);
 *   ... fill fields ...
 *   char *json; kvv_meta_to_json(&m, &json, &err);   // caller frees json
 *   kvv_meta_parse(file, &m2, &err);                 // validates every field
 *   kvv_meta_free(&m2);
 *
 * Deliberately absent: thread count, kernel names, host, time. In the modes
 * vectors are made for (reference "exact", cpu "invariant") none of them may
 * change a bit, so a vector must not depend on them either. The cpu
 * engine's kernel table is recorded (engine.isa): each table has its own
 * reduction order, so its bits differ from another table's by design.
 */
#ifndef KVV_META_H
#define KVV_META_H

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "vectors/kvv_file.h"

#define KVV_META_FORMAT "kvv/1"
#define KVV_META_MAX_SEED 9007199254740991ull /* 2^53-1: exact in any JSON reader */

typedef struct {
    char kvverify_version[32];
    /* model */
    char model_file[256];     /* base name of the GGUF file */
    char model_sha256[65];    /* lower-case hex */
    char arch[32];
    int n_layer, n_embd, n_vocab;
    int kv_dim_k, kv_dim_v;   /* n_head_kv * head_dim(_v) */
    int head_dim_k, head_dim_v;
    /* engine */
    char engine[16];          /* "ref", "cpu", "llama.cpp", a plugin's name */
    char mode[16];            /* "exact", "invariant", "fast"; "native" (plugins) */
    char cache_type[8];       /* "f32", "f16", "bf16" */
    /* what a plugin engine reports (optional; "" / 0 for the built-ins, and
     * then not written, so their vectors stay byte-identical) */
    char engine_version[96];
    char device[96];
    char variant[64];
    char flash_attn[16];
    int n_ubatch;
    char isa[16];             /* the cpu engine's kernel table ("generic", "avx2",
                               * "avx512"); "" for the other engines, and then not
                               * written (their vectors stay byte-identical) */
    /* options */
    int n_gen;                /* greedy steps (>= 1) */
    bool full;                /* full K/V/residual tensors stored */
    bool logits_full;         /* logits as fp32 bits (else one hash per step) */
    bool patch;               /* kv/patch result records present */
    uint64_t seed;            /* seed for random prompts and the patch donor */
    /* prompt */
    char prompt_source[16];   /* "text", "tokens", "random" */
    char *prompt_text;        /* text prompts only, else NULL (owned) */
    int n_prompt;             /* tokens in the prompt record */
} kvv_meta;

void kvv_meta_init(kvv_meta *m);
void kvv_meta_free(kvv_meta *m); /* frees prompt_text; accepts NULL */

/* Serialize to compact JSON with sorted keys (*out malloc'ed, caller frees).
 * @return KVV_OK or KVV_ERR_NOMEM. */
kvv_status kvv_meta_to_json(const kvv_meta *m, char **out, kvv_error *err);

/* Parse and validate f's meta record (records[0]). Every missing or
 * ill-typed field is KVV_ERR_FORMAT "FILE: record meta at byte OFF: field
 * NAME: reason". On failure m holds nothing to free. */
kvv_status kvv_meta_parse(const kvv_file *f, kvv_meta *m, kvv_error *err);

#endif
