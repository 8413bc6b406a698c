/*
 * hook_relay.h — private to engine/: a kvv_hooks that relays every hook to
 * the caller's hooks and routes the residual hook through the engine layer
 * first (host-side controls, checking that a plugin without residual write
 * got an unchanged residual back).
 *
 *   kvv_hook_relay r = {.inner = hooks, .residual = my_residual, .ctx = me};
 *   kvv_hooks h = kvv_hook_relay_hooks(&r);  // pass &h to the engine
 *   // my_residual(r, ...) calls kvv_hook_relay_inner_residual(r, ...) itself
 */
#ifndef KVV_HOOK_RELAY_H
#define KVV_HOOK_RELAY_H

#include "runtime/runtime.h"

typedef struct kvv_hook_relay kvv_hook_relay;
struct kvv_hook_relay {
    const kvv_hooks *inner;  /* the caller's hooks, or NULL (borrowed) */
    void (*residual)(kvv_hook_relay *r, int layer, int n, const int32_t *pos, float *h);
    void *ctx;               /* for residual */
};

/* Hooks bound to r: residual always set (to r->residual), the others set
 * exactly where r->inner has them. r must outlive the forward call. */
kvv_hooks kvv_hook_relay_hooks(kvv_hook_relay *r);

/* Call the caller's residual hook, if any. */
void kvv_hook_relay_inner_residual(kvv_hook_relay *r, int layer, int n, const int32_t *pos,
                                   float *h);

#endif
