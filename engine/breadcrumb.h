/*
 * breadcrumb.h — the last stage an engine reached, kept where a parent
 * process can read it after the engine crashed or hung (verify/isolate.h).
 *
 * The isolation layer maps one kvv_breadcrumb in memory shared with the
 * child that runs a check (mmap MAP_SHARED | MAP_ANONYMOUS before fork) and
 * attaches it in the child. From then on the engine wrappers
 * (engine/engine.c: forward, kv_from_residual) say which call is running
 * and which positions it was given, and a hook relay (the plugin's in
 * engine/plugin/, kvv_breadcrumb_hooks below for every engine) narrows it to
 * the layer and position the engine's hooks last reported. When the child dies by a signal the parent formats it:
 *
 *   "forward, layer 3, position 17"
 *
 * Without an attached record every setter is one NULL test: the wrappers
 * cost nothing in an unisolated run. The record is written with plain
 * stores of small integers (volatile, so the last store before a crash is
 * in memory); a torn read can only make the stage less precise, never
 * unsafe to print (the call name is a fixed table index).
 *
 * Why a process-wide pointer (STYLE habit 10 prefers explicit state): the
 * engines under test do not know about isolation, and a signal can come
 * from any depth of their code; the one global is set once in the child.
 */
#ifndef KVV_BREADCRUMB_H
#define KVV_BREADCRUMB_H

#include <stddef.h>

#include "runtime/runtime.h"

/* The engine calls a breadcrumb can name (kvv_breadcrumb.call). */
typedef enum {
    KVV_CRUMB_NONE = 0,         /* no engine call yet (opening, the check's own code) */
    KVV_CRUMB_OPEN,             /* opening the engine */
    KVV_CRUMB_FORWARD,
    KVV_CRUMB_KV_FROM_RESIDUAL,
    KVV_CRUMB_KV_READ,          /* reading the cache back (plugin kv_read) */
    KVV_CRUMB_KV_EDIT,          /* kv_clear / kv_evict / kv_write */
    KVV_CRUMB_CLOSE,
    KVV_CRUMB_N
} kvv_crumb_call;

typedef struct {
    volatile int call;          /* kvv_crumb_call */
    volatile int layer;         /* -1: not known */
    volatile int pos_first;     /* positions of the call (or of the hook's rows); -1 unknown */
    volatile int pos_last;
    volatile long calls;        /* engine calls so far in this process */
} kvv_breadcrumb;

/* Attach b (shared memory the parent reads; NULL detaches). Clears it. */
void kvv_breadcrumb_attach(kvv_breadcrumb *b);

/* A new engine call: layer and positions unknown until set. */
void kvv_breadcrumb_enter(kvv_crumb_call call);
/* The positions the current call was given (first..last). */
void kvv_breadcrumb_positions(int first, int last);
/* The layer (and rows) the engine's hooks last reported. */
void kvv_breadcrumb_layer(int layer, int pos_first, int pos_last);

/* The caller's hooks, relayed so that each hook first records its layer
 * and rows (kvv_breadcrumb_layer): what lets a crash of a built-in engine
 * name the layer, as the plugin's relay does for plugins. Only the hooks
 * the caller set are relayed (an engine may take another route when asked
 * for more), and only while a breadcrumb is attached. */
typedef struct {
    kvv_hooks inner;            /* the caller's hooks */
    kvv_hooks out;              /* handed to the engine (user = this) */
} kvv_crumb_relay;

/* @return &r->out relaying inner, or inner itself when it is NULL or no
 * breadcrumb is attached (an unisolated run pays one test). */
const kvv_hooks *kvv_breadcrumb_hooks(kvv_crumb_relay *r, const kvv_hooks *inner);

/* "forward", "kv_from_residual", ... ("" for NONE). */
const char *kvv_crumb_call_name(int call);

/* The stage as a phrase into buf: "forward, layer 3, position 17",
 * "forward, positions 0..15", "kv_read", or "before any engine call".
 * @return buf. */
char *kvv_breadcrumb_format(const kvv_breadcrumb *b, char *buf, size_t size);

#endif
