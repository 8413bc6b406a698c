/*
 * synth_mix.c — which type each tensor of a synthetic model is stored as
 * (synth.h): the plain types, llama-quantize's fallbacks for rows a block
 * does not divide, and its Q4_K_M / Q5_K_M mixes (llama.cpp's
 * src/llama-quant.cpp, llama_tensor_get_type, for the dense architectures
 * synth writes: no experts, no Falcon, no 70B special case).
 */
#include "model/synth.h"

#include <stdio.h>
#include <string.h>

bool kvv_synth_type_ok(kvv_type t)
{
    switch (t) {
    case KVV_TYPE_F32: case KVV_TYPE_F16: case KVV_TYPE_BF16: case KVV_TYPE_Q8_0:
    case KVV_TYPE_Q4_0: case KVV_TYPE_Q5_0: case KVV_TYPE_Q4_1: case KVV_TYPE_Q5_1:
    case KVV_TYPE_Q2_K: case KVV_TYPE_Q3_K: case KVV_TYPE_Q4_K: case KVV_TYPE_Q5_K:
    case KVV_TYPE_Q6_K:
        return true;
    default:
        return false;
    }
}

static bool eq_nocase(const char *a, const char *b)
{
    for (; *a && *b; a++, b++) {
        char x = *a >= 'A' && *a <= 'Z' ? (char)(*a - 'A' + 'a') : *a;
        char y = *b >= 'A' && *b <= 'Z' ? (char)(*b - 'A' + 'a') : *b;
        if (x != y)
            return false;
    }
    return *a == *b;
}

bool kvv_synth_type_parse(const char *name, kvv_type *t, kvv_synth_mix *mix)
{
    if (!name)
        return false;
    if (eq_nocase(name, "q4_k_m") || eq_nocase(name, "q5_k_m")) {
        *t = eq_nocase(name, "q4_k_m") ? KVV_TYPE_Q4_K : KVV_TYPE_Q5_K;
        *mix = *t == KVV_TYPE_Q4_K ? KVV_SYNTH_Q4_K_M : KVV_SYNTH_Q5_K_M;
        return true;
    }
    kvv_type k;
    if (!kvv_type_from_name(name, &k) || !kvv_synth_type_ok(k))
        return false;
    *t = k;
    *mix = KVV_SYNTH_PLAIN;
    return true;
}

const char *kvv_synth_type_label(kvv_type t, kvv_synth_mix mix)
{
    switch (mix) {
    case KVV_SYNTH_Q4_K_M: return "Q4_K_M";
    case KVV_SYNTH_Q5_K_M: return "Q5_K_M";
    default:               return kvv_type_name(t);
    }
}

/* llama.cpp's llama_ftype values. The plain K types take the ftype whose
 * default type they are (Q3_K_S, Q4_K_S, Q5_K_S: the smallest mix). */
uint32_t kvv_synth_file_type(kvv_type t, kvv_synth_mix mix)
{
    if (mix == KVV_SYNTH_Q4_K_M)
        return 15;
    if (mix == KVV_SYNTH_Q5_K_M)
        return 17;
    switch (t) {
    case KVV_TYPE_F16:  return 1;
    case KVV_TYPE_Q4_0: return 2;
    case KVV_TYPE_Q4_1: return 3;
    case KVV_TYPE_Q8_0: return 7;
    case KVV_TYPE_Q5_0: return 8;
    case KVV_TYPE_Q5_1: return 9;
    case KVV_TYPE_Q2_K: return 10;
    case KVV_TYPE_Q3_K: return 11;
    case KVV_TYPE_Q4_K: return 14;
    case KVV_TYPE_Q5_K: return 16;
    case KVV_TYPE_Q6_K: return 18;
    case KVV_TYPE_BF16: return 32;
    default:            return 0;
    }
}

/* llama-quantize's fallback for a row length the chosen type's block does
 * not divide (its convert_incompatible_tensor), then F16 if that type's
 * block does not divide it either. The 32-element types go to F16 directly. */
static kvv_type fallback(kvv_type t, int64_t ne0)
{
    const kvv_type_traits *tt = kvv_type_traits_of(t);
    if (!tt || ne0 % tt->blck_size == 0)
        return t;
    kvv_type f;
    switch (t) {
    case KVV_TYPE_Q2_K: case KVV_TYPE_Q3_K: f = KVV_TYPE_IQ4_NL; break;
    case KVV_TYPE_Q4_K: f = KVV_TYPE_Q5_0; break;
    case KVV_TYPE_Q5_K: f = KVV_TYPE_Q5_1; break;
    case KVV_TYPE_Q6_K: f = KVV_TYPE_Q8_0; break;
    default:            return KVV_TYPE_F16;
    }
    return ne0 % kvv_type_traits_of(f)->blck_size == 0 ? f : KVV_TYPE_F16;
}

/* llama-quantize's use_more_bits(i_layer, n_layers). */
static bool more_bits(int i, int n)
{
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

static bool has(const char *name, const char *part)
{
    return strstr(name, part) != NULL;
}

kvv_type kvv_synth_tensor_type(kvv_type t, kvv_synth_mix mix, const char *name, int64_t ne0,
                               int n_layer, bool has_output)
{
    if (mix == KVV_SYNTH_PLAIN)
        return fallback(t, ne0);
    const bool q4 = mix == KVV_SYNTH_Q4_K_M;
    int layer = -1;
    if (sscanf(name, "blk.%d.", &layer) != 1)
        layer = -1;
    /* the output (or the embedding standing in for it): Q6_K, or Q8_0 when
     * 256 does not divide its rows (no further fallback) */
    if (strcmp(name, "output.weight") == 0 ||
        (!has_output && strcmp(name, "token_embd.weight") == 0))
        return ne0 % 256 != 0 ? KVV_TYPE_Q8_0 : KVV_TYPE_Q6_K;
    kvv_type ty = q4 ? KVV_TYPE_Q4_K : KVV_TYPE_Q5_K;
    if (has(name, "attn_v.weight") || has(name, "ffn_down")) {
        /* one attn_v and one ffn_down per layer, counted in layer order */
        if (layer >= 0 && more_bits(layer, n_layer))
            ty = KVV_TYPE_Q6_K;
    } else if (has(name, "attn_qkv.weight")) {
        ty = q4 ? KVV_TYPE_Q5_K : KVV_TYPE_Q6_K;
    }
    return fallback(ty, ne0);
}
