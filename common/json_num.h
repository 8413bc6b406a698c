/*
 * json_num.h — how every JSON document of kvverify writes a number (JSON
 * has no NaN or infinity; docs/report-schema.md):
 *
 *   double       a number when finite, else the string "inf", "-inf", "nan"
 *   ULP distance an integer, or null for KVV_ULP_NAN (a NaN was involved)
 *   float        {"value": <double as above>, "bits": "0x3f800000",
 *                 "hex": "0x1p+0"}: the value, its exact bits, a hex float
 *
 *   json_object_set_new(o, "max_ulp", kvv_json_ulp(s->max_ulp));
 */
#ifndef KVV_JSON_NUM_H
#define KVV_JSON_NUM_H

#include <jansson.h>
#include <stdint.h>

#include "common/ulp.h"

/* @return a new reference (NULL only when jansson cannot allocate). */
json_t *kvv_json_number(double x);
json_t *kvv_json_ulp(uint64_t ulp);
json_t *kvv_json_float(float x);

#endif
