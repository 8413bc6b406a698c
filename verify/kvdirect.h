/*
 * kvdirect.h — the kvdirect check (DESIGN.md §4): KV-Direct in both modes
 * (per-layer residual checkpoints; one layer-0 vector per token) at two
 * budgets (a quarter and half of the context) must give greedy tokens and
 * teacher-forced logits bit-equal to the full cache, with every byte held
 * accounted. Control: per-layer checkpoints stored in bf16 (an approximate
 * option) must be detected as different logits.
 */
#ifndef KVV_KVDIRECT_H
#define KVV_KVDIRECT_H

#include "verify/check.h"

kvv_status kvv_check_kvdirect(const kvv_check_opts *o, kvv_check_result *r, kvv_error *err);

#endif
