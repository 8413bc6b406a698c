/*
 * host_control.c — kvverify-side negative controls (see host_control.h).
 *
 * Each mirrors a control the reference engine plants in its kernels, as
 * closely as an outside observer can: KVV_CTL_KV_REVERSED_SUM changes the
 * rounding of recomputed K/V (here: one ULP of the cache dtype in every K
 * row), KVV_CTL_PERTURB_WEIGHT changes output_norm[0] (here: the largest
 * element of the residual entering the output norm negated, or, for an
 * engine that cannot take a written residual, two tokens swapped). The
 * residual plant is a sign, not a last bit: an engine that rounds its
 * activations to f16 or quantizes them to Q8_0 before the output matmul
 * (llama.cpp with f16 or q8_0 weights) absorbs a one-bit change whole, and
 * a control must be seen whatever the engine's precision.
 */
#include "engine/host_control.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_impl.h"
#include "engine/hook_relay.h"
#include "model/tensor_types.h"

static float flip_low_bit(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u ^= 1u;
    memcpy(&x, &u, sizeof x);
    return x;
}

void kvv_host_control_kv(kvv_cache_type t, int n, int dim, float *k)
{
    for (int i = 0; i < n; i++) {
        float *x = &k[(size_t)i * dim];
        switch (t) {
        case KVV_CACHE_F16:
            *x = kvv_fp16_to_fp32((uint16_t)(kvv_fp32_to_fp16(*x) ^ 1u));
            break;
        case KVV_CACHE_BF16:
            *x = kvv_bf16_to_fp32((uint16_t)(kvv_fp32_to_bf16(*x) ^ 1u));
            break;
        case KVV_CACHE_F32:
        default:
            *x = flip_low_bit(*x);
            break;
        }
    }
}

/* KVV_CTL_HOST_RESIDUAL: after the caller's hook saw (or patched) the final
 * residual, flip the lowest bit of element 0 of each row. */
static void perturb_final(kvv_hook_relay *r, int layer, int n, const int32_t *pos, float *h)
{
    const kvv_engine *e = r->ctx;
    const int E = e->model->hp.n_embd;
    kvv_hook_relay_inner_residual(r, layer, n, pos, h);
    if (layer != e->model->hp.n_layer)
        return;
    for (int i = 0; i < n; i++) {
        float *row = h + (size_t)i * E;
        int big = 0; /* the first element of largest magnitude */
        for (int j = 1; j < E; j++)
            if (fabsf(row[j]) > fabsf(row[big]))
                big = j;
        row[big] = -row[big];
    }
}

kvv_status kvv_host_control_forward(kvv_engine *e, int n, const int32_t *tokens,
                                    const int32_t *pos, const kvv_hooks *hooks,
                                    kvv_logits_mode lm, float *logits, kvv_error *err)
{
    const unsigned ctl = e->opts.control;
    int32_t *tok = NULL;
    if ((ctl & KVV_CTL_HOST_REORDER) && n >= 2 && tokens) {
        tok = malloc((size_t)n * sizeof *tok);
        if (!tok)
            return kvv_error_set(err, KVV_ERR_NOMEM, "forward: out of memory (%d tokens)", n);
        memcpy(tok, tokens, (size_t)n * sizeof *tok);
        for (int j = 1; j < n; j++)
            if (tok[j] != tok[0]) {
                int32_t x = tok[0];
                tok[0] = tok[j];
                tok[j] = x;
                break;
            }
        tokens = tok;
    }
    kvv_hook_relay relay = {hooks, perturb_final, e};
    kvv_hooks th;
    if (ctl & KVV_CTL_HOST_RESIDUAL) {
        th = kvv_hook_relay_hooks(&relay);
        hooks = &th;
    }
    kvv_status s = e->vt->forward(e, n, tokens, pos, hooks, lm, logits, err);
    free(tok);
    return s;
}

const char *kvv_host_control_names(unsigned control, char *buf, size_t size)
{
    static const struct { unsigned bit; const char *name; } names[] = {
        {KVV_CTL_HOST_KV_ULP, "host-kv-ulp"},
        {KVV_CTL_HOST_RESIDUAL, "host-residual"},
        {KVV_CTL_HOST_REORDER, "host-reorder"},
    };
    size_t off = 0;
    if (size)
        buf[0] = '\0';
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (control & names[i].bit) {
            int w = snprintf(buf + off, size - off, "%s%s", off ? " " : "", names[i].name);
            if (w < 0 || (size_t)w >= size - off)
                break;
            off += (size_t)w;
        }
    return buf;
}
