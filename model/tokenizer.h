/*
 * tokenizer.h — tokenizers built from GGUF metadata (tokenizer.ggml.*),
 * matching llama.cpp's: SentencePiece-style "llama" (SPM), byte-level BPE
 * "gpt2" with the pre-tokenizer named by tokenizer.ggml.pre, and WordPiece
 * "bert" (WPM).
 *
 *   kvv_tokenizer *tok; kvv_error err = {0};
 *   if (kvv_tokenizer_open(g, &tok, &err)) ...          // g: an open kvv_gguf
 *   int32_t *ids; int n;
 *   kvv_tokenize(tok, "Once upon a time", 16, true, &ids, &n, &err);  // adds BOS per metadata
 *   char *text; size_t len;
 *   kvv_detokenize(tok, ids, n, &text, &len, &err);
 *   free(ids); free(text); kvv_tokenizer_free(tok);
 */
#ifndef KVV_TOKENIZER_H
#define KVV_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "model/gguf.h"

typedef struct kvv_tokenizer kvv_tokenizer;

/* Build from metadata; copies what it needs (g may be closed afterwards).
 * KVV_ERR_UNSUPPORTED for a tokenizer model or pre-tokenizer kvverify lacks,
 * KVV_ERR_FORMAT for inconsistent metadata (message names key and offset). */
kvv_status kvv_tokenizer_open(const kvv_gguf *g, kvv_tokenizer **out, kvv_error *err);
void kvv_tokenizer_free(kvv_tokenizer *t); /* accepts NULL */

int kvv_tokenizer_n_vocab(const kvv_tokenizer *t);
int32_t kvv_tokenizer_bos(const kvv_tokenizer *t); /* -1 if none */
int32_t kvv_tokenizer_eos(const kvv_tokenizer *t); /* -1 if none */
const char *kvv_tokenizer_model(const kvv_tokenizer *t); /* "llama", "gpt2", "bert" */

/* Encode len bytes of UTF-8 text. add_special: add BOS/EOS as the metadata
 * says (tokenizer.ggml.add_bos_token / add_eos_token and the model's
 * defaults), like llama_tokenize(add_special=true, parse_special=false).
 * *ids is malloc'ed (caller frees). */
kvv_status kvv_tokenize(const kvv_tokenizer *t, const char *text, size_t len, bool add_special,
                        int32_t **ids, int *n, kvv_error *err);

/* As kvv_tokenize; with parse_special, control and unknown token texts in
 * the input ("<s>", "<|endoftext|>") become those tokens, like llama.cpp's
 * parse_special=true (user-defined tokens are always recognised). */
kvv_status kvv_tokenize_ex(const kvv_tokenizer *t, const char *text, size_t len, bool add_special,
                           bool parse_special, int32_t **ids, int *n, kvv_error *err);

/* Decode ids to UTF-8 bytes (*out malloc'ed and NUL-terminated, caller
 * frees). Control tokens (BOS/EOS) produce no text; SPM's leading space
 * added by encoding is removed, as llama.cpp's detokenize does. (A leading
 * BOS consumes that removal in llama.cpp, and here: [BOS, "▁Once"] decodes
 * to " Once", ["▁Once"] to "Once".) BPE/WordPiece vocabularies apply
 * llama.cpp's clean_spaces. An id outside the vocabulary: KVV_ERR_USAGE. */
kvv_status kvv_detokenize(const kvv_tokenizer *t, const int32_t *ids, int n, char **out,
                          size_t *len, kvv_error *err);

/* The bytes one token stands for (as printed during generation), into buf;
 * @return the byte count (may exceed size: then output is truncated), or -1
 * for an id out of range. buf is NUL-terminated when the count is < size. */
int kvv_token_piece(const kvv_tokenizer *t, int32_t id, char *buf, size_t size);

#endif
