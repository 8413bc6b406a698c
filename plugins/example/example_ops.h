/*
 * example_ops.h — the example plugin's op taps (ABI 1.1): the reference
 * engine's taps handed to the host, and the planted fault of one op
 * (`fault=op:NAME:LN`: element argmax|x| of every row of op NAME in layer
 * N gets 1% of the row's max |x| added, inside the pass, so every later op
 * computes from the wrong value — the control of `compare --ops`).
 */
#ifndef KVV_EXAMPLE_OPS_H
#define KVV_EXAMPLE_OPS_H

#include <stddef.h>

#include "kvverify/engine_plugin.h"
#include "model/arch.h"
#include "runtime/runtime.h"

typedef struct {
    int op, layer;           /* the planted fault: op (-1: none) of layer */
    kvv_hooks inner;         /* the hooks relayed to (set per forward) */
    void *op_user;           /* the host's op hook and its user */
    void (*op_fn)(void *user, int layer, int op, int n, const int32_t *pos, int width,
                  const float *x);
} ex_ops;

/* Parse an option value "op:NAME:LN" (NAME as runtime/op_taps.h names it).
 * @return 1 parsed into o, 0 not an op fault (o untouched), -1 malformed
 * (msg says why). */
int ex_ops_parse_fault(const char *v, const kvv_hparams *hp, ex_ops *o, char *msg, size_t size);

/* The KVV_PLUGIN_OP_* bits the reference engine emits for model hp. */
uint64_t ex_ops_mask(const kvv_hparams *hp);

/* Route *h through o for one forward: the host's op hook from ph (when
 * ph's struct_size covers it) and the planted fault. h unchanged when
 * neither applies. o must outlive the forward. */
void ex_ops_hooks(ex_ops *o, const kvv_plugin_hooks *ph, kvv_hooks *h);

#endif
