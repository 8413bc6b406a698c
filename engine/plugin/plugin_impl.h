/*
 * plugin_impl.h — private to engine/plugin/: the loaded library and the
 * state of one plugin engine, shared by the loader (plugin_load.c), the
 * vtable (plugin_engine.c) and the cache mirror (plugin_mirror.c).
 */
#ifndef KVV_PLUGIN_IMPL_H
#define KVV_PLUGIN_IMPL_H

#include <stdbool.h>

#include "engine/plugin/plugin.h"
#include "include/kvverify/engine_plugin.h"

typedef struct {
    void *dl;                  /* dlopen handle */
    kvv_plugin_table t;        /* the plugin's table, zero-extended to the host's size */
    char path[1024];
} kvv_plugin_lib;

/* A staging buffer (plugin_guard.c): what the host hands a plugin instead
 * of its own buffer — pre-filled with a NaN pattern, followed by
 * KVV_PLUGIN_GUARD_FLOATS guard floats — so that after the call the host
 * can tell what the plugin wrote, what it left unwritten and whether it
 * wrote past the declared end. Grown as needed, reused across calls, and
 * poisoned again after each (a later write through a kept pointer shows). */
#define KVV_PLUGIN_GUARD_FLOATS 64
typedef struct {
    unsigned char *p;          /* cap bytes (owned) */
    size_t cap;
    size_t n;                  /* bytes declared to the last call (0: none yet) */
    const char *call, *field;  /* the last call and field, for a later stale write */
} kvv_plugin_stage;

/* What a stage's contents must be after a successful call. */
typedef enum {
    KVV_STAGE_FLOATS,          /* float32 outputs: every one written and finite */
    KVV_STAGE_FLAGS,           /* bytes, every one written (present flags) */
    KVV_STAGE_RAW              /* raw bytes (cache dtype): guard only */
} kvv_stage_kind;

/* The relay of a plugin's hooks (plugin_guard.c): each hook checks its
 * arguments against the ABI's contract for the forward call in progress,
 * records its layer and rows (engine/breadcrumb.h), then calls inner. A
 * call outside the contract is not relayed (the caller's hooks size their
 * buffers by layer, rows and positions) and fails the forward. */
typedef struct {
    kvv_plugin_hooks inner;    /* the hooks relayed to */
    kvv_plugin_hooks out;      /* the hooks handed to the plugin (user = this) */
    int n_layer, n_head, n_ctx;
    int n;                     /* the forward call's rows and (increasing) positions */
    const int32_t *pos;
    char bad[200];             /* the first hook call refused; "" = none */
    const kvv_hparams *hp;     /* op taps: the widths (plugin_ops.c) */
    uint64_t ops;              /* op taps the plugin declared (info.ops) */
} kvv_plugin_crumb;

typedef struct {
    kvv_plugin_lib lib;
    kvv_plugin_engine *pe;     /* the plugin's engine */
    kvv_plugin_host host;      /* handed to the plugin; lives as long as pe */
    kvv_plugin_info info;
    char name[16];             /* the table's name: reports say "llama.cpp" */
    char engine_name[1040];    /* "plugin:PATH" or "llama.cpp" (e->opts.name points here) */
    char device[64];
    kvv_kv_cache *mirror;      /* what kvv_engine_cache returns (NULL without KV_READ) */
    kvv_kv_cache *shadow;      /* the plugin's cache as last agreed with the mirror */
    float *scratch;            /* [n_ctx][n_embd] residual copy (no RESIDUAL_WRITE) */
    int violated_layer;        /* >= 0: a hook wrote a residual the plugin cannot take */
    int clear_pending;         /* kvv_engine_reset without a mirror: kv_clear before the
                                  next forward */
    kvv_plugin_stage st_logits, st_k, st_v, st_present; /* staging (plugin_guard.c) */
    /* ABI 1.1 sequences (plugin_seqs.c) */
    bool seqs;                 /* CAP_SEQS in force: declared, slots set, n_seq_max >= 2 */
    int kv_unified;            /* info.kv_unified of a 1.1 plugin, else -1 */
    int seq_end[KVV_ENGINE_MAX_SEQS]; /* one past each sequence's last position (the host's
                                  count; sequence 0's is the mirror's n_pos) */
} kvv_plugin_state;

/* dlopen path, check the entry and its table. Errors: KVV_ERR_IO (dlopen,
 * dlsym), KVV_ERR_USAGE (ABI major, struct size, required slot, name). */
kvv_status kvv_plugin_lib_open(const char *path, kvv_plugin_lib *lib, kvv_error *err);
void kvv_plugin_lib_close(kvv_plugin_lib *lib);

/* Map a plugin status and message into err ("NAME: message"). */
kvv_status kvv_plugin_fail(const kvv_plugin_state *ps, int code, const char *call,
                           const kvv_plugin_error *perr, kvv_error *err);

/* The host table handed to a plugin. */
kvv_plugin_host kvv_plugin_host_table(kvv_plugin_state *ps);

/* Push host-side edits of the mirror to the plugin (clear, eviction,
 * inserted or changed rows). KVV_ERR_UNSUPPORTED when an edit needs a slot
 * the plugin lacks. No-op without a mirror. */
kvv_status kvv_plugin_mirror_push(kvv_plugin_state *ps, kvv_error *err);
/* Read back positions pos[0..n) of every layer into the mirror. */
kvv_status kvv_plugin_mirror_pull(kvv_plugin_state *ps, int n, const int32_t *pos,
                                  kvv_error *err);
/* Remove position p from the plugin (kv_evict) and the mirror. */
kvv_status kvv_plugin_mirror_evict(kvv_plugin_state *ps, int p, kvv_error *err);

/* ------------------------------------------------------------ plugin_guard.c
 *
 * Output an engine cannot corrupt: every buffer a plugin writes goes
 * through a stage. Violations are KVV_ERR_ENGINE ("engine NAME broke the
 * plugin contract: forward: logits: ..."), which a check reports as its
 * fault "contract" (verify/report/report.h). */

/* A poisoned stage of n bytes for call/field (checked first for writes
 * into the previous call's stage after it returned). *out is the buffer to
 * hand the plugin. KVV_ERR_NOMEM, or KVV_ERR_ENGINE for a stale write. */
kvv_status kvv_plugin_stage_begin(kvv_plugin_state *ps, kvv_plugin_stage *s, size_t n,
                                  const char *call, const char *field, void **out,
                                  kvv_error *err);
/* After the call: the guard must be intact (always); when the call
 * succeeded (ok) the contents must be complete and, for FLOATS, finite.
 * Then, when the call succeeded and passed these checks, the n bytes go
 * to dst (NULL: nowhere); the stage is poisoned again either way.
 * row: elements per row (for the message), 0 = none. */
kvv_status kvv_plugin_stage_end(kvv_plugin_state *ps, kvv_plugin_stage *s, kvv_stage_kind kind,
                                bool ok, size_t row, void *dst, kvv_error *err);
void kvv_plugin_stage_free(kvv_plugin_stage *s);

/* Hooks for the plugin's forward of n rows at pos[n] (checked, strictly
 * increasing) of an engine of n_ctx positions, relaying to inner (which
 * may be NULL: then NULL) through c: each call's arguments are checked
 * (the first refused goes to c->bad) and its layer and rows recorded in
 * the breadcrumb. */
const kvv_plugin_hooks *kvv_plugin_crumb_hooks(kvv_plugin_crumb *c, const kvv_plugin_hooks *inner,
                                               const kvv_plugin_state *ps, int n_ctx, int n,
                                               const int32_t *pos);

/* A reset of an engine without a mirror: kv_clear now (plugin_engine.c). */
kvv_status kvv_plugin_clear_pending(kvv_plugin_state *ps, kvv_error *err);

/* ------------------------------------------------------------ plugin_seqs.c
 *
 * ABI 1.1 sequences behind the engine vtable's decode / seq_rm / seq_cp /
 * seq_kv. Sequence 0 is the mirror's: its host-side edits are pushed before
 * a call that touches it, and what a call changed in it is read back. */

/* After open: CAP_SEQS of a plugin whose table reaches the 1.1 slots must
 * come with all four slots (else KVV_ERR_USAGE naming the slot, as for
 * every capability); sets ps->seqs (declared, slots, info.n_seq_max >= 2)
 * and ps->kv_unified. A 1.0 plugin (table without the 1.1 slots) has no
 * sequences whatever its caps say (unknown bits are ignored). */
kvv_status kvv_plugin_seqs_open(kvv_plugin_state *ps, kvv_error *err);

kvv_status kvv_plugin_decode(kvv_engine *e, const kvv_batch *b, float *logits, kvv_error *err);
kvv_status kvv_plugin_seq_rm(kvv_engine *e, int seq, int p0, int p1, kvv_error *err);
kvv_status kvv_plugin_seq_cp(kvv_engine *e, int src, int dst, int p0, int p1, kvv_error *err);
kvv_status kvv_plugin_seq_kv(kvv_engine *e, int seq, int layer, int pos0, int n, float *k,
                             float *v, uint8_t *present, kvv_error *err);

/* ------------------------------------------------------------ plugin_ops.c
 *
 * Op taps (ABI 1.1, runtime/op_taps.h): read only from a plugin built
 * for 1.1 or later that declares KVV_PLUGIN_CAP_OP_TAPS; a 1.0 plugin
 * loads as before and op taps are listed unsupported. */

/* KVV_ENGINE_CAP_OP_TAPS when ps's plugin offers op taps, else 0. */
unsigned kvv_plugin_ops_caps(const kvv_plugin_state *ps);
/* Hand hooks->op to the plugin's hooks ph (when the engine offers taps). */
void kvv_plugin_ops_hooks(const kvv_plugin_state *ps, const kvv_hooks *hooks,
                          kvv_plugin_hooks *ph);
/* Relay inner->op through c (checked: an op the plugin declared, its
 * layer, rows among the call's, the vocabulary's width for the model hp). */
void kvv_plugin_ops_relay(kvv_plugin_crumb *c, const kvv_plugin_hooks *inner,
                          const kvv_plugin_state *ps, const kvv_hparams *hp);
/* For plugin_ops.c: plugin_guard.c's argument checks. */
bool kvv_plugin_crumb_rows_ok(kvv_plugin_crumb *c, const char *hook, int layer, int max, int n,
                              const int32_t *pos);
bool kvv_plugin_crumb_refuse(kvv_plugin_crumb *c, const char *msg);

#endif
