/*
 * kv.h — the kv check (DESIGN.md §4): are the keys and values held in the
 * cache bit-identical to K/V recomputed from the residual stream?
 *
 * For every layer l and token t the check records the residual h_l(t)
 * entering the layer (residual hook) during one prefill of the prompt, reads
 * K_l(t), V_l(t) back from the engine's cache (after q/k norm, RoPE and
 * rounding to the cache dtype), and recomputes K/V with
 * kvv_engine_kv_from_residual
 *   (a) one token at a time,
 *   (b) all tokens at once,
 *   (c) in chunks of an odd size (o->chunk, default 5; a ragged last chunk),
 * comparing bit for bit. It also checks the kv hook's K/V against the cache
 * (the hook contract says "exactly as stored").
 *
 * Table rows (per layer): "K token-by-token", "V token-by-token", "K all",
 * "V all", "K chunk=C", "V chunk=C", "K hook", "V hook".
 *
 * Controls (o->controls):
 *   - one flipped bit (lowest mantissa bit of element 0) in the cached
 *     K[l=min(2,L-1), t=min(5,T-1)] through kvv_engine_cache: the comparison
 *     must find a difference exactly there; the bit is restored after.
 *   - recompute with a different summation order (engine control
 *     KVV_CTL_KV_REVERSED_SUM): with an f32 cache it is compared against the
 *     cache directly; with f16/bf16 storage, where rounding masks nearly every
 *     last-bit difference, it is compared against a normal f32 recompute of
 *     the same residuals (the count at the requested dtype is reported too).
 * o->force_fail flips a bit in the cached V of the last layer and token
 * before the comparisons, so the check must FAIL.
 *
 * @return KVV_OK with a verdict in r, or an error (r->verdict ERROR/SKIPPED).
 */
#ifndef KVV_KV_H
#define KVV_KV_H

#include "verify/check.h"

kvv_status kvv_check_kv(const kvv_check_opts *o, kvv_check_result *r, kvv_error *err);

/* What kv needs from the engine: residuals, the kv hook, the cache read
 * back and K/V recomputed from residuals (else: unsupported by this
 * engine). */
#define KVV_CHECK_KV_NEEDS                                                                   \
    (KVV_ENGINE_CAP_RESIDUAL_READ | KVV_ENGINE_CAP_KV_HOOK | KVV_ENGINE_CAP_KV_READ |         \
     KVV_ENGINE_CAP_KV_FROM_RESIDUAL)

/* The chunk size (c) uses for n tokens when o->chunk is 0: the first of 5,
 * 3, 7, 9, 11 that does not divide n and is < n (1 if n <= 2). */
int kvv_kv_default_chunk(int n);

#endif
