/*
 * kvv_vectors_impl.h — private to vectors/: the in-memory record set that
 * gen writes and check compares (kvv_compute.c fills it).
 */
#ifndef KVV_VECTORS_IMPL_H
#define KVV_VECTORS_IMPL_H

#include "model/arch.h"
#include "vectors/kvv_vectors.h"

#define KVV_VSET_MAX 16

/* One computed record: host-order data, owned. */
typedef struct {
    char name[KVV_FILE_NAME_MAX + 1];
    kvv_rec_type type;
    int n_dims;
    uint64_t dims[KVV_FILE_MAX_DIMS];
    void *data;
    size_t size;    /* bytes */
} kvv_vrec;

typedef struct {
    kvv_vrec recs[KVV_VSET_MAX];
    int n;
} kvv_vset;

/* Run o->engine on model m over o->tokens and fill every record except meta
 * (see kvv_vectors.h for the list). d receives the engine's description.
 * On failure *out holds nothing to free. */
kvv_status kvv_vectors_compute(const kvv_model *m, const kvv_vectors_opts *o, kvv_vset *out,
                               kvv_engine_desc *d, kvv_error *err);
void kvv_vset_free(kvv_vset *s);
const kvv_vrec *kvv_vset_find(const kvv_vset *s, const char *name);

#endif
