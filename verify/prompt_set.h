/*
 * prompt_set.h — several prompts for one measurement: a figure that rests on
 * one prompt is one argmax flip away from another figure (kvverify evict
 * measures every policy over a set and reports mean and spread).
 *
 *   kvv_prompt_set s;
 *   kvv_prompt_set_init(&s);
 *   if (kvv_prompt_set_builtin(model, 8, 128, seed, &s, &err)) ...   // or _from_file
 *   for (int i = 0; i < s.n; i++) use(s.items[i].tokens, s.items[i].n_tokens);
 *   kvv_prompt_set_free(&s);
 */
#ifndef KVV_PROMPT_SET_H
#define KVV_PROMPT_SET_H

#include <stdint.h>

#include "model/arch.h"
#include "common/error.h"

typedef struct {
    int32_t *tokens;      /* [n_tokens], owned */
    int n_tokens;
    char name[48];        /* shown in reports: "park", "line 3", "random 2" */
} kvv_prompt;

typedef struct {
    kvv_prompt *items;    /* [n], owned */
    int n, cap;
    char source[32];      /* "text" (built-in), "random", "file", "tokens" */
} kvv_prompt_set;

void kvv_prompt_set_init(kvv_prompt_set *s);
void kvv_prompt_set_free(kvv_prompt_set *s); /* accepts NULL; s reusable after init */

/* Append a copy of tokens[0..n) (n >= 1) named `name`. @return KVV_OK,
 * KVV_ERR_USAGE for n < 1, KVV_ERR_NOMEM. */
kvv_status kvv_prompt_set_add(kvv_prompt_set *s, const int32_t *tokens, int n, const char *name,
                              kvv_error *err);

/* The built-in set. With a tokenizer m can use: the first n_prompts texts of
 * verify/texts.h kvv_text_prompts (at most KVV_TEXT_PROMPTS), tokenized (BOS
 * as the vocabulary's metadata says) and all cut to one length: n_tokens, or
 * the shortest text's token count when that is smaller (so a budget means
 * the same fraction of every context). Without one: n_prompts seeded random
 * prompts of n_tokens (seeds seed, seed+1, ...; first token BOS when the
 * model names one). source says which. @return KVV_OK, KVV_ERR_USAGE for
 * n_prompts or n_tokens < 1 or, with a tokenizer, n_prompts above
 * KVV_TEXT_PROMPTS (never fewer prompts than asked), KVV_ERR_NOMEM. */
kvv_status kvv_prompt_set_builtin(const kvv_model *m, int n_prompts, int n_tokens, uint64_t seed,
                                  kvv_prompt_set *s, kvv_error *err);

/* One prompt per non-blank line of the text file at path (a trailing CR is
 * dropped; lines are not cut), tokenized with m's tokenizer, named "line N".
 * @return KVV_OK; KVV_ERR_IO naming the file; KVV_ERR_USAGE "PATH:LINE: ..."
 * for a line that gives no tokens, or when m has no tokenizer or the file
 * holds no prompt; tokenizer errors as kvv_tokenize returns them. */
kvv_status kvv_prompt_set_from_file(const kvv_model *m, const char *path, kvv_prompt_set *s,
                                    kvv_error *err);

#endif
