/*
 * info.h — what `kvverify info` shows, as text and as JSON: a GGUF file
 * (metadata with long arrays summarized, tensors, totals per type, the
 * architecture as kvverify reads it, the per-token memory table), a named
 * model shape without a file (model/shapes.h), and the cpu engine's kernel
 * tables this CPU runs (engine/cpu/cpu_isa.h). The command (cli/cmd_info.c)
 * reads the options and chooses; the documents are built here.
 *
 *   kvv_info_file f;
 *   if (kvv_info_file_open("m.gguf", &f, &err)) ...   // unreadable: err says why
 *   kvv_info_file_print(&f);                           // text on stdout
 *   json_t *j = kvv_info_file_json(&f);                // or the JSON object
 *   kvv_info_file_close(&f);
 *
 * info is a file viewer: a file of an unsupported architecture, or a
 * vocabulary-only file, is still described, with its reason; only a file
 * the GGUF reader rejects has no description. Strings from the file are
 * shown escaped in text and made valid UTF-8 ('?' for bad bytes) in JSON;
 * non-finite floats are "nan", "inf", "-inf" strings in JSON.
 */
#ifndef KVV_VERIFY_INFO_H
#define KVV_VERIFY_INFO_H

#include <jansson.h>

#include "engine/cpu/cpu_isa.h"
#include "model/arch.h"
#include "model/gguf.h"
#include "model/shapes.h"

/* One GGUF file as info describes it. */
typedef struct {
    const char *path;         /* borrowed */
    kvv_gguf *gguf;           /* the parsed file (owned; by model once bound) */
    kvv_model *model;         /* the bound model, NULL when not bound */
    kvv_hparams hp;           /* valid when arch_status is KVV_OK */
    kvv_status arch_status;   /* reading the hyperparameters */
    kvv_error arch_err;
    kvv_status bind_status;   /* binding the tensors (KVV_OK when there are none) */
    kvv_error bind_err;
} kvv_info_file;

/* Parse the file, read its architecture and bind its tensors (when it has
 * any). A file whose architecture or tensors fail is still open: the
 * statuses say why. @return KVV_OK, or the GGUF reader's error (nothing
 * open). Close with kvv_info_file_close. */
kvv_status kvv_info_file_open(const char *path, kvv_info_file *f, kvv_error *err);
void kvv_info_file_close(kvv_info_file *f); /* accepts a closed one */

/* The file as text on stdout / as a new JSON object (caller decrefs). */
void kvv_info_file_print(const kvv_info_file *f);
json_t *kvv_info_file_json(const kvv_info_file *f);

/* A named shape's architecture and memory table, hp from kvv_shape_hparams. */
void kvv_info_shape_print(const kvv_shape *s, const kvv_hparams *hp);
json_t *kvv_info_shape_json(const kvv_shape *s, const kvv_hparams *hp);

/* The cpu engine's kernel tables, ci from kvv_cpu_isa_probe. */
void kvv_info_cpu_print(const kvv_cpu_isa_info *ci);
json_t *kvv_info_cpu_json(const kvv_cpu_isa_info *ci);

#endif
