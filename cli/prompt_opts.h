/*
 * prompt_opts.h — the prompt options of the check commands, run, numerics and
 * vectors gen, parsed in one place:
 *
 *   -p, --prompt TEXT   text, tokenized with the model's tokenizer
 *   --tokens 1,2,3      token ids, used as given
 *   --random N          N pseudo-random token ids from --seed
 *   --seed S            seed of the random prompt (default 1)
 *
 * At most one of -p, --tokens and --random (checked once every option is
 * read); none means the command's default prompt.
 *
 *   kvv_prompt_cli p;
 *   kvv_prompt_cli_init(&p, "kv");
 *   kvv_opt_group g[] = {kvv_prompt_cli_group(&p), ...};   // cli/opts.h
 *   ... kvv_opts_parse ...
 *   kvv_prompt_cli_make(&p, model, 32, &ids, &n, &source);  // or build your own
 *   kvv_prompt_cli_free(&p);
 */
#ifndef KVV_PROMPT_OPTS_H
#define KVV_PROMPT_OPTS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cli/opts.h"
#include "model/arch.h"

typedef struct {
    const char *cmd;        /* subcommand name, for messages */
    const char *text;       /* -p / --prompt (borrowed from argv) */
    int32_t *tokens;        /* --tokens (owned) */
    int n_tokens;
    long n_random;          /* --random N, 0 = not given */
    uint64_t seed;          /* --seed (default 1) */
    bool raw;               /* -p's text without special tokens (run's --raw; no BOS) */
} kvv_prompt_cli;

void kvv_prompt_cli_init(kvv_prompt_cli *p, const char *cmd);
void kvv_prompt_cli_free(kvv_prompt_cli *p); /* the token list; p reusable after init */

/* The group for kvv_opts_parse (state: p); its finish rejects two prompts. */
kvv_opt_group kvv_prompt_cli_group(kvv_prompt_cli *p);
/* Was any prompt option given? */
bool kvv_prompt_cli_given(const kvv_prompt_cli *p);

/* The option lines, under the heading "prompt (one of; default: ...)". */
void kvv_prompt_cli_help(FILE *f, const char *default_prompt);

/* The prompt for model m: -p through the model's tokenizer (BOS as its
 * metadata says; none when p->raw), --tokens as given, else --random N or
 * n_default pseudo-random ids from --seed (first = the model's BOS when it names one,
 * so models without a tokenizer work). *out is malloc'ed (caller frees);
 * *source is "text", "tokens" or "random". Messages go to stderr.
 * @return 0, or the exit code (2 bad input, 77 unsupported tokenizer). */
int kvv_prompt_cli_make(const kvv_prompt_cli *p, const kvv_model *m, int n_default,
                        int32_t **out, int *n, const char **source);

#endif
