/* json_num.c — see json_num.h. */
#include "common/json_num.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

json_t *kvv_json_number(double x)
{
    if (isfinite(x))
        return json_real(x);
    if (isnan(x))
        return json_string("nan");
    return json_string(x > 0 ? "inf" : "-inf");
}

json_t *kvv_json_ulp(uint64_t ulp)
{
    return ulp == KVV_ULP_NAN ? json_null() : json_integer((json_int_t)ulp);
}

json_t *kvv_json_float(float x)
{
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    char hex[16], hf[48];
    snprintf(hex, sizeof hex, "0x%08x", (unsigned)bits);
    snprintf(hf, sizeof hf, "%a", (double)x);
    return json_pack("{s:o, s:s, s:s}", "value", kvv_json_number((double)x), "bits", hex, "hex",
                     hf);
}
