/*
 * example_impl.h — private to plugins/example/: the example plugin's engine
 * (example_plugin.c: the 1.0 calls over the reference engine) shared with
 * its sequences (example_seqs.c: the ABI 1.1 slots).
 */
#ifndef KVV_EXAMPLE_IMPL_H
#define KVV_EXAMPLE_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "kvverify/engine_plugin.h"
#include "model/arch.h"
#include "plugins/example/example_ops.h"
#include "reference/ref.h"

enum {
    FAULT_NONE, FAULT_RECOMPUTE, FAULT_DECODE, FAULT_KV_READ, /* wrong bits */
    FAULT_SEGV, FAULT_ABORT, FAULT_HANG, FAULT_NAN, FAULT_SHORT, FAULT_WRONG_SIZE, FAULT_LEAK,
    FAULT_SEQ_LEAK, /* a K/V row of one sequence lands in another's cache */
    N_FAULTS
};

/* Sequences served: a reference engine (and cache) per sequence, opened on
 * its first use. */
#define KVV_EXAMPLE_MAX_SEQS 64

struct kvv_plugin_engine {
    kvv_model *model;
    kvv_ref *ref;      /* sequence 0 (forward, kv_read, ...) */
    kvv_ref_opts ref_opts; /* how every sequence's engine is opened */
    kvv_ref *seq[KVV_EXAMPLE_MAX_SEQS]; /* seq[0] == ref; others NULL until used */
    int n_ubatch;      /* 0 = whole calls */
    int fault;
    int fault_at;      /* AT_* */
    int fault_layer;   /* -1 = any */
    int fault_pos;     /* -1 = any */
    unsigned char *leaked; /* FAULT_LEAK: a host buffer kept past its call */
    uint64_t caps;
    ex_ops ops;        /* op taps and fault=op:NAME:LN (example_ops.h) */
};

/* err->msg = the formatted message; @return code. */
int kvv_example_fail(kvv_plugin_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* kvverify status -> plugin status, message copied. */
int kvv_example_from_status(kvv_status s, const kvv_error *e, kvv_plugin_error *err);
/* FAULT_LEAK: write the host buffer kept from an earlier call, now. */
void kvv_example_leak_write(kvv_plugin_engine *e);
/* kv_read of cache c (sequence 0's with its faults, or another's). */
int kvv_example_kv_read(kvv_plugin_engine *e, kvv_kv_cache *c, int layer, int pos0, int n,
                        void *k, void *v, uint8_t *present, kvv_plugin_error *err);

/* The ABI 1.1 slots (example_seqs.c). */
int kvv_example_decode(kvv_plugin_engine *e, int n, const int32_t *tokens, const int32_t *pos,
                       const int32_t *seq, const uint8_t *want, float *logits,
                       kvv_plugin_error *err);
int kvv_example_seq_rm(kvv_plugin_engine *e, int seq, int p0, int p1, kvv_plugin_error *err);
int kvv_example_seq_cp(kvv_plugin_engine *e, int src, int dst, int p0, int p1,
                       kvv_plugin_error *err);
int kvv_example_kv_read_seq(kvv_plugin_engine *e, int seq, int layer, int pos0, int n, void *k,
                            void *v, uint8_t *present, kvv_plugin_error *err);
/* Close every sequence's engine but sequence 0's. */
void kvv_example_seqs_close(kvv_plugin_engine *e);

#endif
