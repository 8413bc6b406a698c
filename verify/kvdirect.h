/*
 * kvdirect.h — the kvdirect check (DESIGN.md §4): KV-Direct with per-layer
 * residual checkpoints at a quarter and half of the context, and with one
 * layer-0 vector per token at half, must decode greedy tokens and logits
 * bit-equal to the full cache, every byte held accounted. Control:
 * per-layer checkpoints stored in bf16 (an approximate option) must be
 * detected as different logits.
 */
#ifndef KVV_KVDIRECT_H
#define KVV_KVDIRECT_H

#include "verify/check.h"

kvv_status kvv_check_kvdirect(const kvv_check_opts *o, kvv_check_result *r, kvv_error *err);

#endif
