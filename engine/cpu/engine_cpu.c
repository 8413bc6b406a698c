/*
 * engine_cpu.c — the optimized cpu engine (engine/cpu/cpu_engine.h) in the
 * engine registry (engine/engine_impl.h). Modes: fast, invariant (exact is
 * taken to mean invariant, the cpu engine's default).
 */
#include "engine/cpu/cpu_engine.h"
#include "engine/engine_impl.h"

kvv_status kvv_engine_open_cpu(const kvv_model *m, const kvv_engine_opts *o, kvv_engine **out,
                               kvv_error *err)
{
    return kvv_cpu_engine_open(m, o, out, err);
}
