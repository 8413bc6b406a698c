/*
 * select.h — the pure selection rules of the cache policies: given scores
 * for the candidate positions of one (layer, KV head), which survive.
 *
 * Candidates are always passed in ascending position order, so index i is
 * "lower position" than index j > i. Every rule:
 *   - keeps exactly min(n, keep) candidates;
 *   - honours forced survivors (sinks, recent windows) inside the budget,
 *     as kvpress does (integer truncation, sinks and windows count inside);
 *   - breaks score ties by the lower position (the lower one survives);
 *   - never looks at anything but its arguments (no state, deterministic).
 *
 *   uint8_t keep[n];
 *   kvv_select_topk(score, NULL, n, budget, keep);   // H2O heavy hitters, KNorm, ...
 */
#ifndef KVV_POLICY_SELECT_H
#define KVV_POLICY_SELECT_H

#include <stdint.h>

/* Keep the `keep` best candidates: all forced ones first (forced may be
 * NULL; if more are forced than `keep`, the highest positions among the
 * forced win), then the highest scores among the rest, ties to the lower
 * position. out[i] = 1 for a survivor. */
void kvv_select_topk(const double *score, const uint8_t *forced, int n, int keep, uint8_t *out);

/* Window: the last `keep` candidates. */
void kvv_select_window(int n, int keep, uint8_t *out);

/* StreamingLLM: the first `sinks` candidates and the last keep - sinks.
 * If keep <= sinks, only the first `keep`. */
void kvv_select_streaming(int n, int sinks, int keep, uint8_t *out);

/* SnapKV score pooling: 1-D average pooling of s[0..n) with an odd kernel
 * and zero padding at the borders (count_include_pad, like PyTorch's
 * avg_pool1d with padding kernel/2): out[i] = sum(s[i-k/2 .. i+k/2]) / k. */
void kvv_select_pool(const double *s, int n, int kernel, double *out);

/* PyramidKV layer budgets: a linear ramp from the first to the last layer
 * whose mean is `budget` (integer truncation), largest at layer 0:
 * b_min = budget / 2, b_max = 2*budget - b_min,
 * b_l = b_max - l*(b_max - b_min)/(n_layer - 1). */
int kvv_select_pyramid_budget(int budget, int n_layer, int layer);

#endif
