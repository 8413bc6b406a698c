/*
 * host_control.h — negative controls the engine layer plants on kvverify's
 * side (KVV_CTL_HOST_*, engine/engine.h), private to engine/. The wrappers in
 * engine/engine.c call these when the flags are in e->opts.control, so the
 * same mechanism works over any engine: a plugin whose kernels kvverify
 * cannot change, or the reference engine in tests.
 */
#ifndef KVV_HOST_CONTROL_H
#define KVV_HOST_CONTROL_H

#include "engine/engine.h"

/* forward through e->vt with KVV_CTL_HOST_RESIDUAL / _REORDER applied
 * (tokens are copied before reordering; the caller's arrays are untouched).
 * Errors: those of the engine, KVV_ERR_NOMEM. */
kvv_status kvv_host_control_forward(kvv_engine *e, int n, const int32_t *tokens,
                                    const int32_t *pos, const kvv_hooks *hooks,
                                    kvv_logits_mode lm, float *logits, kvv_error *err);

/* KVV_CTL_HOST_KV_ULP: move element 0 of each of the n rows of k [n][dim]
 * by one unit in the last place of dtype t (the value stays representable
 * in t, so cache rounding cannot hide it). */
void kvv_host_control_kv(kvv_cache_type t, int n, int dim, float *k);

/* Short names of the host flags in control ("host-kv-ulp host-residual"),
 * "" when none. @return buf. */
const char *kvv_host_control_names(unsigned control, char *buf, size_t size);

#endif
