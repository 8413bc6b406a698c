/*
 * ulp.h — the one marker for "a NaN was involved" in a ULP distance
 * (reference/oracle.h and verify/compare_stats.h compute distances; the
 * JSON encoding, common/json_num.h, writes this marker as null).
 */
#ifndef KVV_ULP_H
#define KVV_ULP_H

#include <stdint.h>

/* The distance of a pair with a NaN: larger than any real distance, so a
 * maximum over distances shows it, and never a number in a report. */
#define KVV_ULP_NAN UINT64_MAX

#endif
