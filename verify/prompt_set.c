/* prompt_set.c — see prompt_set.h. */
#include "verify/prompt_set.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/tokenizer.h"
#include "verify/check.h"
#include "verify/texts.h"

void kvv_prompt_set_init(kvv_prompt_set *s)
{
    memset(s, 0, sizeof *s);
}

void kvv_prompt_set_free(kvv_prompt_set *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->n; i++)
        free(s->items[i].tokens);
    free(s->items);
    memset(s, 0, sizeof *s);
}

kvv_status kvv_prompt_set_add(kvv_prompt_set *s, const int32_t *tokens, int n, const char *name,
                              kvv_error *err)
{
    if (n < 1)
        return kvv_error_set(err, KVV_ERR_USAGE, "prompt '%s' is empty", name);
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 8;
        kvv_prompt *p = realloc(s->items, (size_t)cap * sizeof *p);
        if (!p)
            return kvv_error_set(err, KVV_ERR_NOMEM, "prompt set: out of memory");
        s->items = p;
        s->cap = cap;
    }
    kvv_prompt *p = &s->items[s->n];
    memset(p, 0, sizeof *p);
    p->tokens = malloc((size_t)n * sizeof *p->tokens);
    if (!p->tokens)
        return kvv_error_set(err, KVV_ERR_NOMEM, "prompt set: out of memory");
    memcpy(p->tokens, tokens, (size_t)n * sizeof *p->tokens);
    p->n_tokens = n;
    snprintf(p->name, sizeof p->name, "%s", name);
    s->n++;
    return KVV_OK;
}

/* The vocabulary's BOS id, or -1 when it names none in range. */
static int32_t bos_of(const kvv_model *m)
{
    uint32_t bos = UINT32_MAX;
    kvv_error err = {0};
    if (kvv_gguf_get_u32(m->gguf, "tokenizer.ggml.bos_token_id", false, &bos, &err) ||
        bos >= (uint32_t)m->hp.n_vocab)
        return -1;
    return (int32_t)bos;
}

static kvv_status random_set(const kvv_model *m, int n_prompts, int n_tokens, uint64_t seed,
                             kvv_prompt_set *s, kvv_error *err)
{
    int32_t *buf = malloc((size_t)n_tokens * sizeof *buf);
    if (!buf)
        return kvv_error_set(err, KVV_ERR_NOMEM, "prompt set: out of memory");
    int32_t bos = bos_of(m);
    kvv_status st = KVV_OK;
    for (int i = 0; i < n_prompts && st == KVV_OK; i++) {
        char name[48];
        snprintf(name, sizeof name, "random %d", i + 1);
        kvv_prompt_random(seed + (uint64_t)i, m->hp.n_vocab, bos, buf, n_tokens);
        st = kvv_prompt_set_add(s, buf, n_tokens, name, err);
    }
    free(buf);
    snprintf(s->source, sizeof s->source, "random");
    return st;
}

kvv_status kvv_prompt_set_builtin(const kvv_model *m, int n_prompts, int n_tokens, uint64_t seed,
                                  kvv_prompt_set *s, kvv_error *err)
{
    if (n_prompts < 1 || n_tokens < 1)
        return kvv_error_set(err, KVV_ERR_USAGE, "prompt set: %d prompts of %d tokens", n_prompts,
                             n_tokens);
    kvv_tokenizer *tok = NULL;
    kvv_error terr = {0};
    if (kvv_tokenizer_open(m->gguf, &tok, &terr) != KVV_OK)
        return random_set(m, n_prompts, n_tokens, seed, s, err);
    if (n_prompts > KVV_TEXT_PROMPTS) { /* never fewer than asked, silently */
        kvv_tokenizer_free(tok);
        return kvv_error_set(err, KVV_ERR_USAGE, "prompt set: %d prompts asked, the built-in "
                             "texts are %d (more: one prompt a line in a file)", n_prompts,
                             KVV_TEXT_PROMPTS);
    }
    int32_t *ids[KVV_TEXT_PROMPTS] = {0};
    int len[KVV_TEXT_PROMPTS] = {0};
    kvv_status st = KVV_OK;
    for (int i = 0; i < n_prompts && st == KVV_OK; i++) {
        const char *t = kvv_text_prompts[i].text;
        st = kvv_tokenize(tok, t, strlen(t), true, &ids[i], &len[i], err);
        if (st == KVV_OK && len[i] < n_tokens)
            n_tokens = len[i];
    }
    kvv_tokenizer_free(tok);
    for (int i = 0; i < n_prompts && st == KVV_OK; i++)
        st = kvv_prompt_set_add(s, ids[i], n_tokens, kvv_text_prompts[i].name, err);
    for (int i = 0; i < n_prompts; i++)
        free(ids[i]);
    snprintf(s->source, sizeof s->source, "text");
    return st;
}

static bool blank(const char *line)
{
    for (; *line; line++)
        if (!isspace((unsigned char)*line))
            return false;
    return true;
}

kvv_status kvv_prompt_set_from_file(const kvv_model *m, const char *path, kvv_prompt_set *s,
                                    kvv_error *err)
{
    kvv_tokenizer *tok = NULL;
    kvv_error terr = {0};
    if (kvv_tokenizer_open(m->gguf, &tok, &terr) != KVV_OK)
        return kvv_error_set(err, KVV_ERR_USAGE,
                             "%s: prompts are text, but the model has no usable tokenizer (%s)",
                             path, terr.msg);
    FILE *f = fopen(path, "rb");
    if (!f) {
        kvv_tokenizer_free(tok);
        return kvv_error_set(err, KVV_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    int line_no = 0;
    kvv_status st = KVV_OK;
    while (st == KVV_OK && (got = getline(&line, &cap, f)) >= 0) {
        line_no++;
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r'))
            line[--got] = 0;
        if (blank(line))
            continue;
        int32_t *ids = NULL;
        int n = 0;
        st = kvv_tokenize(tok, line, (size_t)got, true, &ids, &n, err);
        if (st == KVV_OK && n < 1)
            st = kvv_error_set(err, KVV_ERR_USAGE, "%s:%d: the line gives no tokens", path,
                               line_no);
        char name[48];
        snprintf(name, sizeof name, "line %d", line_no);
        if (st == KVV_OK)
            st = kvv_prompt_set_add(s, ids, n, name, err);
        free(ids);
    }
    if (st == KVV_OK && ferror(f))
        st = kvv_error_set(err, KVV_ERR_IO, "%s: read error: %s", path, strerror(errno));
    if (st == KVV_OK && s->n == 0)
        st = kvv_error_set(err, KVV_ERR_USAGE, "%s: no prompt in the file (one per line)", path);
    free(line);
    fclose(f);
    kvv_tokenizer_free(tok);
    snprintf(s->source, sizeof s->source, "file");
    return st;
}
