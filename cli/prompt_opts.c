/* prompt_opts.c — the prompt options (see prompt_opts.h). */
#include "cli/prompt_opts.h"

#include <stdlib.h>
#include <string.h>

#include "model/tokenizer.h"
#include "verify/check.h"

void kvv_prompt_cli_init(kvv_prompt_cli *p, const char *cmd)
{
    memset(p, 0, sizeof *p);
    p->cmd = cmd;
    p->seed = 1;
}

void kvv_prompt_cli_free(kvv_prompt_cli *p)
{
    free(p->tokens);
    p->tokens = NULL;
    p->n_tokens = 0;
}

bool kvv_prompt_cli_given(const kvv_prompt_cli *p)
{
    return p->text || p->tokens || p->n_random > 0;
}

static bool parse(void *state, kvv_opts *o)
{
    kvv_prompt_cli *p = state;
    long v;
    if (kvv_opts_value(o, "-p") || kvv_opts_value(o, "--prompt")) {
        p->text = o->value;
        /* a lone BOS exercises nothing a check could compare */
        if (o->value && !o->value[0])
            kvv_opts_error(o, "option %s: the prompt is empty (give text, --tokens or --random)",
                           o->arg[1] == 'p' ? "-p" : "--prompt");
    } else if (kvv_opts_value(o, "--tokens")) {
        kvv_prompt_cli_free(p);
        if (o->value)
            kvv_opts_int_list(o, "--tokens", o->value, &p->tokens, &p->n_tokens);
    } else if (kvv_opts_value(o, "--random")) {
        if (o->value && kvv_opts_int(o, "--random", o->value, 1, 1 << 20, &v))
            p->n_random = v;
    } else if (kvv_opts_value(o, "--seed")) {
        if (o->value)
            kvv_opts_u64(o, "--seed", o->value, &p->seed);
    } else {
        return false;
    }
    return true;
}

static void finish(void *state, kvv_opts *o)
{
    const kvv_prompt_cli *p = state;
    if ((p->text != NULL) + (p->tokens != NULL) + (p->n_random > 0) > 1)
        kvv_opts_error(o, "options -p, --tokens and --random exclude each other");
}

kvv_opt_group kvv_prompt_cli_group(kvv_prompt_cli *p)
{
    return (kvv_opt_group){parse, finish, p};
}

void kvv_prompt_cli_help(FILE *f, const char *default_prompt)
{
    fprintf(f,
            "prompt (one of; default: %s):\n"
            "  -p, --prompt TEXT   text, tokenized with the model's tokenizer\n"
            "  --tokens 1,2,3      token ids\n"
            "  --random N          N pseudo-random tokens from --seed (first = BOS if any)\n"
            "  --seed N            seed for random prompts (default 1)\n",
            default_prompt);
}

/* -p: the text through the model's tokenizer. */
static int from_text(const kvv_prompt_cli *p, const kvv_model *m, int32_t **out, int *n)
{
    kvv_error err = {0};
    kvv_tokenizer *tok;
    if (kvv_tokenizer_open(m->gguf, &tok, &err))
        return kvv_cli_fail(&err);
    kvv_status s = kvv_tokenize(tok, p->text, strlen(p->text), !p->raw, out, n, &err);
    kvv_tokenizer_free(tok);
    if (s)
        return kvv_cli_fail(&err);
    if (*n < 1) {
        fprintf(stderr, "kvverify %s: option -p: the text gives no tokens\n", p->cmd);
        return KVV_EXIT_BAD_INPUT;
    }
    return 0;
}

int kvv_prompt_cli_make(const kvv_prompt_cli *p, const kvv_model *m, int n_default,
                        int32_t **out, int *n, const char **source)
{
    if (p->text) {
        *source = "text";
        return from_text(p, m, out, n);
    }
    if (p->tokens) {
        *out = malloc((size_t)p->n_tokens * sizeof **out);
        if (!*out)
            return KVV_EXIT_BAD_INPUT;
        memcpy(*out, p->tokens, (size_t)p->n_tokens * sizeof **out);
        *n = p->n_tokens;
        *source = "tokens";
        return 0;
    }
    *n = p->n_random > 0 ? (int)p->n_random : n_default;
    *out = malloc((size_t)*n * sizeof **out);
    if (!*out)
        return KVV_EXIT_BAD_INPUT;
    kvv_error err = {0};
    uint32_t bos = UINT32_MAX;
    if (kvv_gguf_get_u32(m->gguf, "tokenizer.ggml.bos_token_id", false, &bos, &err) ||
        bos >= (uint32_t)m->hp.n_vocab)
        bos = UINT32_MAX;
    kvv_prompt_random(p->seed, m->hp.n_vocab, bos == UINT32_MAX ? -1 : (int32_t)bos, *out, *n);
    *source = "random";
    return 0;
}
