/*
 * capture.h — forward-pass hooks that record (and optionally patch or
 * perturb) what the engine computes, indexed by absolute position so a
 * sequence run in any chunking lands in the same slots.
 *
 *   kvv_capture c;
 *   kvv_capture_init(&c, &model->hp, n_pos, KVV_CAPTURE_RESID | KVV_CAPTURE_KV);
 *   kvv_hooks h = kvv_capture_hooks(&c);
 *   kvv_engine_forward(e, n, tok, pos, &h, KVV_LOGITS_ALL, logits, &err);
 *   const float *h3 = kvv_capture_resid(&c, 3, t);   // residual entering layer 3 at t
 *   kvv_capture_free(&c);
 *
 * Layout: resid [n_layer+1][n_pos][n_embd] (index n_layer = the final
 * residual before the output norm), k [n_layer][n_pos][kdim], v likewise.
 *
 * Patching: set patch_layer >= 0, patch_src = [n_pos][n_embd] rows to write
 * over the residual entering that layer, for positions in
 * [patch_lo, patch_hi]. Perturbing: set flip_layer >= 0 to flip the lowest
 * mantissa bit of resid[flip_layer][flip_pos][flip_index] as it passes (the
 * engine continues from the flipped value). Both happen before recording.
 *
 * Layer by layer: set feed to another run's capture (with residuals, the
 * same positions): after recording the residual entering each layer (its
 * own), the engine continues from feed's residual there, so each recorded
 * residual is one layer's own computation from feed's input (compare,
 * tables: engines that round activations to 8 bits, whose one-quantum
 * differences later layers would amplify).
 */
#ifndef KVV_CAPTURE_H
#define KVV_CAPTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "model/arch.h"
#include "common/error.h"
#include "runtime/runtime.h"

enum {
    KVV_CAPTURE_RESID = 1u << 0,
    KVV_CAPTURE_KV = 1u << 1
};

typedef struct kvv_capture_s {
    int n_layer, n_embd, kdim, vdim, n_pos;
    float *resid;            /* [n_layer+1][n_pos][n_embd] or NULL (owned) */
    float *k, *v;            /* [n_layer][n_pos][kdim|vdim] or NULL (owned) */
    /* patching (off when patch_layer < 0) */
    int patch_layer;
    const float *patch_src;  /* [n_pos][n_embd], borrowed */
    int patch_lo, patch_hi;  /* inclusive position range */
    /* perturbation (off when flip_layer < 0) */
    int flip_layer, flip_pos, flip_index;
    /* layer by layer (off when NULL): continue from feed's residuals, borrowed */
    const struct kvv_capture_s *feed;
} kvv_capture;

/* Allocate zeroed buffers for positions 0..n_pos-1. KVV_ERR_NOMEM. */
kvv_status kvv_capture_init(kvv_capture *c, const kvv_hparams *hp, int n_pos, unsigned what,
                            kvv_error *err);
void kvv_capture_free(kvv_capture *c); /* accepts NULL */

/* Fill every recorded slot with a quiet NaN, so a slot the engine never
 * reported compares as different (NaN is never equal). */
void kvv_capture_poison(kvv_capture *c);

/* Hooks bound to c (residual and kv slots set per what was captured). */
kvv_hooks kvv_capture_hooks(kvv_capture *c);

/* Row pointers (no bounds checks beyond asserting the layout). */
float *kvv_capture_resid(const kvv_capture *c, int layer, int pos);
float *kvv_capture_k(const kvv_capture *c, int layer, int pos);
float *kvv_capture_v(const kvv_capture *c, int layer, int pos);

#endif
