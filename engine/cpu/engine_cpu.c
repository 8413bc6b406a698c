/*
 * engine_cpu.c — the optimized cpu engine (engine/cpu/cpu_engine.h) in the
 * engine registry (engine/engine_impl.h). Modes: fast and invariant; exact
 * (the reference engine's) is refused, as the reference refuses the cpu
 * engine's modes, so a report never names a mode that did not run.
 */
#include "engine/cpu/cpu_engine.h"
#include "engine/engine_impl.h"

kvv_status kvv_engine_open_cpu(const kvv_model *m, const kvv_engine_opts *o, kvv_engine **out,
                               kvv_error *err)
{
    *out = NULL;
    if (o->mode != KVV_MODE_FAST && o->mode != KVV_MODE_INVARIANT)
        return kvv_error_set(err, KVV_ERR_USAGE,
                             "engine cpu has only modes 'fast' and 'invariant' (asked for '%s')",
                             kvv_mode_name(o->mode));
    return kvv_cpu_engine_open(m, o, out, err);
}
