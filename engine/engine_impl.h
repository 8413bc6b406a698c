/*
 * engine_impl.h — private to engine/: the open functions of every engine the
 * registry in engine/engine.c knows. Not for verify/ or cli/ (they open
 * engines by name through kvv_engine_open).
 *
 * An engine's open function receives the model (borrowed) and the options
 * (already validated for the common fields: cache type, n_ctx >= 0) and
 * returns a kvv_engine it allocated, with vt, model, opts and impl filled in.
 * kvv_engine_close calls vt->close, which frees impl AND the kvv_engine.
 *
 * Adding an engine: write kvv_engine_open_NAME, declare it here, add one
 * line {"NAME", kvv_engine_open_NAME} to the table in engine/engine.c.
 */
#ifndef KVV_ENGINE_IMPL_H
#define KVV_ENGINE_IMPL_H

#include "engine/engine.h"

typedef kvv_status (*kvv_engine_open_fn)(const kvv_model *m, const kvv_engine_opts *o,
                                         kvv_engine **out, kvv_error *err);

/* The reference engine (engine/ref/engine_ref.c): mode must be KVV_MODE_EXACT. */
kvv_status kvv_engine_open_ref(const kvv_model *m, const kvv_engine_opts *o, kvv_engine **out,
                               kvv_error *err);

/* The optimized CPU engine (engine/cpu/engine_cpu.c): FAST or INVARIANT. */
kvv_status kvv_engine_open_cpu(const kvv_model *m, const kvv_engine_opts *o, kvv_engine **out,
                               kvv_error *err);

#endif
