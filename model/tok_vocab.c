/*
 * tok_vocab.c — build a kvv_tokenizer from GGUF metadata (tokenizer.ggml.*),
 * with the defaults and fix-ups llama.cpp's llama_vocab::load applies, so that
 * the same file tokenizes the same way in both:
 *
 *   model "llama" -> SPM: BOS 1, EOS 2, UNK 0, add_bos, add_space_prefix
 *   model "gpt2"  -> BPE: BOS = EOS = 11 unless set, merges required, the
 *                    pre-tokenizer named by tokenizer.ggml.pre (tok_pretok.c)
 *   model "bert"  -> WPM: BOS(CLS) 101, UNK 100, SEP 102, PAD 0, MASK 103
 *
 * then the *_token_id keys (an id out of range keeps the default), the
 * add_bos/add_eos/add_sep/add_space_prefix keys, token attributes from
 * tokenizer.ggml.token_type plus llama.cpp's text-based fix-ups (end-of-
 * generation and fill-in-the-middle tokens become CONTROL; the phi-3 and
 * mask-token strip flags), and the list of special tokens that the
 * tokenizer pre-partitions, longest first.
 *
 * Token lookup and merge ranks are hash maps (FNV-1a with a murmur3
 * finalizer, linear probing), so a 100k-token vocabulary loads in tens of
 * milliseconds.
 */
#include "model/tokenizer_impl.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ hash map */

uint32_t kvv_tok_hash(const char *s, size_t len)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 16777619u;
    }
    /* FNV's low bits mix poorly and the table indexes by them: finish with
     * murmur3's avalanche step */
    h ^= h >> 16;
    h *= 0x85EBCA6Bu;
    h ^= h >> 13;
    h *= 0xC2B2AE35u;
    h ^= h >> 16;
    return h;
}

static kvv_status map_init(kvv_tok_map *m, size_t n, kvv_error *err)
{
    size_t cap = 16;
    while (cap < 2 * n + 1)
        cap <<= 1;
    m->slots = calloc(cap, sizeof *m->slots);
    if (!m->slots)
        return kvv_error_set(err, KVV_ERR_NOMEM, "tokenizer: out of memory (%zu hash slots)", cap);
    m->cap = cap;
    m->count = 0;
    return KVV_OK;
}

int32_t kvv_tok_map_put(kvv_tok_map *m, const char *key, size_t len, int32_t value)
{
    uint32_t h = kvv_tok_hash(key, len);
    size_t mask = m->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        kvv_tok_slot *s = &m->slots[i];
        if (!s->key) {
            s->key = key;
            s->len = (uint32_t)len;
            s->hash = h;
            s->value = value;
            m->count++;
            return -1;
        }
        if (s->hash == h && s->len == len && memcmp(s->key, key, len) == 0)
            return s->value; /* first value wins */
    }
}

int32_t kvv_tok_map_get(const kvv_tok_map *m, const char *key, size_t len)
{
    if (!m->slots)
        return -1;
    uint32_t h = kvv_tok_hash(key, len);
    size_t mask = m->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        const kvv_tok_slot *s = &m->slots[i];
        if (!s->key)
            return -1;
        if (s->hash == h && s->len == len && memcmp(s->key, key, len) == 0)
            return s->value;
    }
}

/* ------------------------------------------------------------ helpers */

static const kvv_gguf_kv *find_array(const kvv_gguf *g, const char *key, kvv_gguf_type a,
                                     kvv_gguf_type b, bool required, kvv_status *st,
                                     kvv_error *err)
{
    const kvv_gguf_kv *kv = kvv_gguf_find_kv(g, key);
    *st = KVV_OK;
    if (!kv) {
        if (required)
            *st = kvv_error_set(err, KVV_ERR_FORMAT, "%s: %s: missing (required by the tokenizer)",
                                g->path, key);
        return NULL;
    }
    if (kv->type != KVV_GGUF_ARRAY || (kv->arr_type != a && kv->arr_type != b)) {
        *st = kvv_error_set(err, KVV_ERR_FORMAT, "%s: %s at byte %llu: invalid type %s%s%s",
                            g->path, key, (unsigned long long)kv->offset,
                            kvv_gguf_type_name(kv->type), kv->type == KVV_GGUF_ARRAY ? " of " : "",
                            kv->type == KVV_GGUF_ARRAY ? kvv_gguf_type_name(kv->arr_type) : "");
        return NULL;
    }
    return kv;
}

/* Optional token id key: an absent key keeps *id, an id out of range keeps
 * it too (llama.cpp warns "bad special token ... using default id"). */
static kvv_status read_id(const kvv_gguf *g, const char *key, int n_vocab, int32_t *id,
                          kvv_error *err)
{
    if (*id >= n_vocab)
        *id = -1;
    uint32_t v = UINT32_MAX;
    kvv_status st = kvv_gguf_get_u32(g, key, false, &v, err);
    if (st)
        return st;
    if (v != UINT32_MAX && v < (uint32_t)n_vocab)
        *id = (int32_t)v;
    return KVV_OK;
}

static int32_t find_text(const kvv_tokenizer *t, const char *s)
{
    return kvv_tok_map_get(&t->vocab, s, strlen(s));
}

static bool in_list(const char *s, uint32_t len, const char *const *list)
{
    if (len == 0 || (s[0] != '<' && s[0] != '[' && s[0] != '_'))
        return false; /* every listed text starts with one of these */
    for (; *list; list++)
        if (strlen(*list) == len && memcmp(*list, s, len) == 0)
            return true;
    return false;
}

/* Texts llama.cpp treats as end-of-generation tokens (forced CONTROL). */
static const char *const k_eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>", "[e~[", NULL};

/* Fill-in-the-middle texts, one list per role (the first found is CONTROL). */
static const char *const k_fim_pre[] = {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
    "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>", "<PRE>", "\xe2\x96\x81<PRE>",
    "<|code_prefix|>", "<|prefix|>", NULL};
static const char *const k_fim_suf[] = {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
    "<\xef\xbd\x9c" "fim\xe2\x96\x81" "hole\xef\xbd\x9c>", "<SUF>", "\xe2\x96\x81<SUF>",
    "<|code_suffix|>", "<|suffix|>", NULL};
static const char *const k_fim_mid[] = {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
    "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>", "<MID>", "\xe2\x96\x81<MID>",
    "<|code_middle|>", "<|middle|>", NULL};
static const char *const k_fim_pad[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]",
                                        NULL};
static const char *const k_fim_rep[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>",
                                        "<reponame>", NULL};
static const char *const k_fim_sep[] = {"<|file_sep|>", NULL};

/* Mark the lowest id whose text is in list as CONTROL, unless the role's id
 * came from metadata (key, or its deprecated name, with an id in range). */
static void mark_first(kvv_tokenizer *t, const kvv_gguf *g, const char *key,
                       const char *old_key, const char *const *list)
{
    uint32_t v;
    kvv_error ignore = {0};
    if ((kvv_gguf_get_u32(g, key, true, &v, &ignore) == KVV_OK && v < (uint32_t)t->n_vocab) ||
        (old_key && kvv_gguf_get_u32(g, old_key, true, &v, &ignore) == KVV_OK &&
         v < (uint32_t)t->n_vocab))
        return; /* the role's id is in the metadata */
    int32_t best = -1;
    for (const char *const *p = list; *p; p++) {
        int32_t id = find_text(t, *p);
        if (id >= 0 && (best < 0 || id < best))
            best = id;
    }
    if (best >= 0)
        t->attr[best] |= KVV_TOK_ATTR_CONTROL;
}

static bool contains_ci(const char *hay, const char *needle)
{
    char low[256];
    size_t n = strlen(hay);
    if (n >= sizeof low)
        n = sizeof low - 1;
    for (size_t i = 0; i < n; i++)
        low[i] = (char)tolower((unsigned char)hay[i]);
    low[n] = '\0';
    return strstr(low, needle) != NULL;
}

/* Text-based attribute fix-ups of llama_vocab::load, in its order. */
static void fix_attributes(kvv_tokenizer *t, const kvv_gguf *g)
{
    mark_first(t, g, "tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id", k_fim_pre);
    mark_first(t, g, "tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id", k_fim_suf);
    mark_first(t, g, "tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id", k_fim_mid);
    mark_first(t, g, "tokenizer.ggml.fim_pad_token_id", NULL, k_fim_pad);
    mark_first(t, g, "tokenizer.ggml.fim_rep_token_id", NULL, k_fim_rep);
    mark_first(t, g, "tokenizer.ggml.fim_sep_token_id", NULL, k_fim_sep);
    for (int i = 0; i < t->n_vocab; i++)
        if (in_list(t->text[i], t->text_len[i], k_eog_texts))
            t->attr[i] |= KVV_TOK_ATTR_CONTROL;
    /* gpt-oss: these are always rendered */
    static const char *const k_render[] = {"<|channel|>", "<|message|>", "<|start|>",
                                           "<|constrain|>", NULL};
    for (const char *const *p = k_render; *p; p++) {
        int32_t id = find_text(t, *p);
        if (id >= 0)
            t->attr[id] = KVV_TOK_ATTR_USER_DEFINED;
    }
    /* o200k_harmony / solar-open: <|end|> is not end-of-generation */
    int32_t ret = find_text(t, "<|return|>"), call = find_text(t, "<|call|>");
    int32_t calls = find_text(t, "<|calls|>"), flush = find_text(t, "<|flush|>");
    int32_t end = find_text(t, "<|end|>");
    if (end >= 0 && ((ret >= 0 && (call >= 0 || calls >= 0)) || ((call >= 0 || calls >= 0) && flush >= 0)))
        t->attr[end] = KVV_TOK_ATTR_USER_DEFINED;
    /* gemma4 / paddleocr: </s> is a normal token when <|tool_response> exists */
    int32_t s_end = find_text(t, "</s>");
    if (s_end >= 0 && find_text(t, "<|tool_response>") >= 0)
        t->attr[s_end] = KVV_TOK_ATTR_NORMAL;
}

static int cmp_special(const void *a, const void *b, const kvv_tokenizer *t)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (t->text_len[x] != t->text_len[y])
        return t->text_len[x] > t->text_len[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* Insertion sort by (length desc, id asc): the list is short (tens to a few
 * thousand ids) and qsort has no context argument in C11. */
static void sort_special(kvv_tokenizer *t)
{
    for (int i = 1; i < t->n_special; i++) {
        int32_t v = t->special[i];
        int j = i - 1;
        while (j >= 0 && cmp_special(&t->special[j], &v, t) > 0) {
            t->special[j + 1] = t->special[j];
            j--;
        }
        t->special[j + 1] = v;
    }
}

static kvv_status build_special(kvv_tokenizer *t, const kvv_gguf *g, kvv_error *err)
{
    t->special = malloc((size_t)(t->n_vocab ? t->n_vocab : 1) * sizeof *t->special);
    if (!t->special)
        return kvv_error_set(err, KVV_ERR_NOMEM, "tokenizer: out of memory");
    t->n_special = 0;
    for (int i = 0; i < t->n_vocab; i++)
        if (t->attr[i] & (KVV_TOK_ATTR_CONTROL | KVV_TOK_ATTR_USER_DEFINED | KVV_TOK_ATTR_UNKNOWN))
            t->special[t->n_special++] = i;
    sort_special(t);

    /* Per-model strip flags (llama.cpp sets them by name). */
    char name[256] = "", arch[128] = "";
    kvv_error ignore = {0};
    if (kvv_gguf_get_str(g, "general.name", false, name, sizeof name, &ignore))
        name[0] = '\0';
    if (kvv_gguf_get_str(g, "general.architecture", false, arch, sizeof arch, &ignore))
        arch[0] = '\0';
    if (strstr(t->pre, "jina-v2-de") || strstr(t->pre, "jina-v2-es") ||
        strstr(t->pre, "jina-v2-code") || strstr(arch, "nomic-bert-moe") ||
        strstr(arch, "jina-bert-v3")) {
        int32_t id = find_text(t, "<mask>");
        if (id >= 0)
            t->attr[id] |= KVV_TOK_ATTR_LSTRIP;
    } else if (contains_ci(name, "phi-3") || contains_ci(name, "phi3")) {
        for (int i = 0; i < t->n_special; i++)
            t->attr[t->special[i]] |= KVV_TOK_ATTR_RSTRIP;
        int32_t id = find_text(t, "</s>");
        if (id >= 0)
            t->attr[id] |= KVV_TOK_ATTR_RSTRIP;
        static const char *const keep[] = {"<unk>", "<s>", "<|endoftext|>", NULL};
        for (const char *const *p = keep; *p; p++)
            if ((id = find_text(t, *p)) >= 0)
                t->attr[id] &= ~(uint32_t)KVV_TOK_ATTR_RSTRIP;
    } else if (contains_ci(name, "modern-bert")) {
        int32_t id = find_text(t, "[MASK]");
        if (id >= 0)
            t->attr[id] |= KVV_TOK_ATTR_LSTRIP;
    }
    return KVV_OK;
}

/* ------------------------------------------------------------ tokens, merges */

static kvv_status load_tokens(kvv_tokenizer *t, const kvv_gguf *g, kvv_error *err)
{
    kvv_status st;
    const kvv_gguf_kv *tok = find_array(g, "tokenizer.ggml.tokens", KVV_GGUF_STRING,
                                        KVV_GGUF_STRING, true, &st, err);
    if (!tok)
        return st;
    if (tok->arr_n == 0 || tok->arr_n > KVV_TOK_MAX_VOCAB)
        return kvv_error_set(err, KVV_ERR_FORMAT, "%s: tokenizer.ggml.tokens at byte %llu: %llu tokens "
                             "is out of range (1..%d)", g->path, (unsigned long long)tok->offset,
                             (unsigned long long)tok->arr_n, KVV_TOK_MAX_VOCAB);
    int n = (int)tok->arr_n;
    const kvv_gguf_kv *sc = find_array(g, "tokenizer.ggml.scores", KVV_GGUF_FLOAT32,
                                       KVV_GGUF_INT32, false, &st, err);
    if (st)
        return st;
    if (sc && sc->arr_n < tok->arr_n)
        return kvv_error_set(err, KVV_ERR_FORMAT,
                             "%s: tokenizer.ggml.scores at byte %llu: %llu scores for %d tokens",
                             g->path, (unsigned long long)sc->offset,
                             (unsigned long long)sc->arr_n, n);
    const kvv_gguf_kv *ty = find_array(g, "tokenizer.ggml.token_type", KVV_GGUF_INT32,
                                       KVV_GGUF_INT32, false, &st, err);
    if (st)
        return st;
    if (ty && ty->arr_n < tok->arr_n)
        return kvv_error_set(err, KVV_ERR_FORMAT,
                             "%s: tokenizer.ggml.token_type at byte %llu: %llu types for %d tokens",
                             g->path, (unsigned long long)ty->offset,
                             (unsigned long long)ty->arr_n, n);

    size_t bytes = 0;
    for (int i = 0; i < n; i++)
        bytes += (tok->arr_str[i].len ? tok->arr_str[i].len : 24) + 1;
    t->n_vocab = n;
    t->arena = malloc(bytes);
    t->text = malloc((size_t)n * sizeof *t->text);
    t->text_len = malloc((size_t)n * sizeof *t->text_len);
    t->score = malloc((size_t)n * sizeof *t->score);
    t->attr = malloc((size_t)n * sizeof *t->attr);
    if (!t->arena || !t->text || !t->text_len || !t->score || !t->attr)
        return kvv_error_set(err, KVV_ERR_NOMEM, "%s: out of memory for %d tokens", g->path, n);
    if ((st = map_init(&t->vocab, (size_t)n, err)))
        return st;

    char *p = t->arena;
    for (int i = 0; i < n; i++) {
        const kvv_gguf_str *s = &tok->arr_str[i];
        size_t len = s->len;
        if (len == 0) /* llama.cpp renames empty tokens */
            len = (size_t)snprintf(p, 24, "[EMPTY_%d]", i);
        else
            memcpy(p, s->ptr, len);
        p[len] = '\0';
        int32_t first = kvv_tok_map_put(&t->vocab, p, len, i);
        if (first >= 0)
            return kvv_error_set(err, KVV_ERR_FORMAT,
                                 "%s: tokenizer.ggml.tokens at byte %llu: duplicate token '%s' "
                                 "(ids %d and %d)",
                                 g->path, (unsigned long long)tok->offset, p, first, i);
        t->text[i] = p;
        t->text_len[i] = (uint32_t)len;
        if ((int)len > t->max_token_len)
            t->max_token_len = (int)len;
        p += len + 1;
        if (!sc)
            t->score[i] = 0.0f;
        else if (sc->arr_type == KVV_GGUF_FLOAT32)
            t->score[i] = (float)kvv_gguf_arr_f64(sc, (uint64_t)i);
        else
            t->score[i] = (float)kvv_gguf_arr_i64(sc, (uint64_t)i);
        uint32_t a = KVV_TOK_ATTR_NORMAL;
        if (ty) {
            switch (kvv_gguf_arr_i64(ty, (uint64_t)i)) {
            case 1: a = KVV_TOK_ATTR_NORMAL; break;
            case 2: a = KVV_TOK_ATTR_UNKNOWN; break;
            case 3: a = KVV_TOK_ATTR_CONTROL; break;
            case 4: a = KVV_TOK_ATTR_USER_DEFINED; break;
            case 5: a = KVV_TOK_ATTR_UNUSED; break;
            case 6: a = KVV_TOK_ATTR_BYTE; break;
            default: a = KVV_TOK_ATTR_UNDEFINED; break;
            }
        }
        t->attr[i] = a;
    }
    return KVV_OK;
}

static kvv_status load_merges(kvv_tokenizer *t, const kvv_gguf *g, kvv_error *err)
{
    kvv_status st;
    const kvv_gguf_kv *m = find_array(g, "tokenizer.ggml.merges", KVV_GGUF_STRING,
                                      KVV_GGUF_STRING, true, &st, err);
    if (!m)
        return st;
    if (m->arr_n > KVV_TOK_MAX_VOCAB)
        return kvv_error_set(err, KVV_ERR_FORMAT, "%s: tokenizer.ggml.merges at byte %llu: %llu merges "
                             "is more than %d", g->path, (unsigned long long)m->offset,
                             (unsigned long long)m->arr_n, KVV_TOK_MAX_VOCAB);
    size_t bytes = 1;
    for (uint64_t i = 0; i < m->arr_n; i++)
        bytes += m->arr_str[i].len + 1;
    t->merge_arena = malloc(bytes);
    if (!t->merge_arena)
        return kvv_error_set(err, KVV_ERR_NOMEM, "%s: out of memory for merges", g->path);
    if ((st = map_init(&t->merges, (size_t)m->arr_n, err)))
        return st;
    char *p = t->merge_arena;
    for (uint64_t i = 0; i < m->arr_n; i++) {
        const kvv_gguf_str *s = &m->arr_str[i];
        /* llama.cpp splits at the first space after the first byte; a merge
         * without one can never apply */
        if (s->len < 3 || !memchr(s->ptr + 1, ' ', s->len - 1))
            continue;
        memcpy(p, s->ptr, s->len);
        p[s->len] = '\0';
        kvv_tok_map_put(&t->merges, p, s->len, (int32_t)i);
        p += s->len + 1;
    }
    return KVV_OK;
}

/* ------------------------------------------------------------ open/free */

static kvv_status get_bool_opt(const kvv_gguf *g, const char *key, bool *v, kvv_error *err)
{
    return kvv_gguf_get_bool(g, key, false, v, err);
}

kvv_status kvv_tokenizer_open(const kvv_gguf *g, kvv_tokenizer **out, kvv_error *err)
{
    kvv_status st;
    *out = NULL;
    kvv_tokenizer *t = calloc(1, sizeof *t);
    if (!t)
        return kvv_error_set(err, KVV_ERR_NOMEM, "tokenizer: out of memory");
    t->bos = t->eos = t->unk = t->sep = t->pad = -1;
    snprintf(t->path, sizeof t->path, "%s", g->path ? g->path : "(memory)");

    if ((st = kvv_gguf_get_str(g, "tokenizer.ggml.model", true, t->model, sizeof t->model, err)))
        goto fail;
    if ((st = kvv_gguf_get_str(g, "tokenizer.ggml.pre", false, t->pre, sizeof t->pre, err)))
        goto fail;
    if (strcmp(t->model, "llama") == 0) {
        t->type = KVV_TOK_SPM;
        t->bos = 1; t->eos = 2; t->unk = 0;
        t->add_space_prefix = true;
        t->add_bos = true;
    } else if (strcmp(t->model, "gpt2") == 0) {
        t->type = KVV_TOK_BPE;
        t->bos = 11; t->eos = 11;
        kvv_pretok_flags f;
        if ((st = kvv_pretok_open(t->pre, &t->pretok, &f, err))) {
            const kvv_gguf_kv *kv = kvv_gguf_find_kv(g, "tokenizer.ggml.pre");
            kvv_error inner = *err;
            st = kvv_error_set(err, st, "%s: tokenizer.ggml.pre at byte %llu: %s", g->path,
                               kv ? (unsigned long long)kv->offset : 0ull, inner.msg);
            goto fail;
        }
        t->clean_spaces = f.clean_spaces;
        t->ignore_merges = f.ignore_merges;
        t->add_bos = f.add_bos;
        t->add_sep = f.add_sep;
        if (f.bos_null)
            t->bos = -1;
    } else if (strcmp(t->model, "bert") == 0) {
        t->type = KVV_TOK_WPM;
        t->bos = 101; t->unk = 100; t->sep = 102; t->pad = 0; /* MASK 103 */
        t->clean_spaces = true;
        t->add_bos = true;
        t->add_sep = true;
    } else {
        const kvv_gguf_kv *kv = kvv_gguf_find_kv(g, "tokenizer.ggml.model");
        st = kvv_error_set(err, KVV_ERR_UNSUPPORTED,
                           "%s: tokenizer.ggml.model at byte %llu: tokenizer '%s' is not supported "
                           "(kvverify has llama/SPM, gpt2/BPE and bert/WordPiece)",
                           g->path, kv ? (unsigned long long)kv->offset : 0ull, t->model);
        goto fail;
    }
    if ((st = get_bool_opt(g, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix, err)))
        goto fail;

    if ((st = load_tokens(t, g, err)))
        goto fail;
    if (t->type == KVV_TOK_BPE && (st = load_merges(t, g, err)))
        goto fail;

    if ((st = read_id(g, "tokenizer.ggml.bos_token_id", t->n_vocab, &t->bos, err)) ||
        (st = read_id(g, "tokenizer.ggml.eos_token_id", t->n_vocab, &t->eos, err)) ||
        (st = read_id(g, "tokenizer.ggml.unknown_token_id", t->n_vocab, &t->unk, err)) ||
        (st = read_id(g, "tokenizer.ggml.seperator_token_id", t->n_vocab, &t->sep, err)) ||
        (st = read_id(g, "tokenizer.ggml.padding_token_id", t->n_vocab, &t->pad, err)))
        goto fail;
    if ((st = get_bool_opt(g, "tokenizer.ggml.add_bos_token", &t->add_bos, err)) ||
        (st = get_bool_opt(g, "tokenizer.ggml.add_eos_token", &t->add_eos, err)) ||
        (st = get_bool_opt(g, "tokenizer.ggml.add_sep_token", &t->add_sep, err)))
        goto fail;
    static const struct { const char *add, *id; } checks[] = {
        {"tokenizer.ggml.add_bos_token", "tokenizer.ggml.bos_token_id"},
        {"tokenizer.ggml.add_eos_token", "tokenizer.ggml.eos_token_id"},
        {"tokenizer.ggml.add_sep_token", "tokenizer.ggml.seperator_token_id"}};
    const bool adds[3] = {t->add_bos, t->add_eos, t->add_sep};
    const int32_t ids[3] = {t->bos, t->eos, t->sep};
    for (int i = 0; i < 3; i++)
        if (adds[i] && ids[i] < 0) {
            const kvv_gguf_kv *kv = kvv_gguf_find_kv(g, checks[i].add);
            char where[48] = " (the model's default)";
            if (kv)
                snprintf(where, sizeof where, " at byte %llu", (unsigned long long)kv->offset);
            st = kvv_error_set(err, KVV_ERR_FORMAT, "%s: %s%s is true, but %s is not set", g->path,
                               checks[i].add, where, checks[i].id);
            goto fail;
        }
    t->lowercase = true;
    if ((st = get_bool_opt(g, "tokenizer.ggml.normalizer.lowercase", &t->lowercase, err)))
        goto fail;
    t->strip_accents = t->lowercase;
    if ((st = get_bool_opt(g, "tokenizer.ggml.normalizer.strip_accents", &t->strip_accents, err)))
        goto fail;

    fix_attributes(t, g);
    if ((st = build_special(t, g, err)))
        goto fail;
    *out = t;
    return KVV_OK;
fail:
    kvv_tokenizer_free(t);
    return st;
}

void kvv_tokenizer_free(kvv_tokenizer *t)
{
    if (!t)
        return;
    free(t->arena);
    free(t->text);
    free(t->text_len);
    free(t->score);
    free(t->attr);
    free(t->vocab.slots);
    free(t->merge_arena);
    free(t->merges.slots);
    kvv_pretok_free(t->pretok);
    free(t->special);
    free(t);
}

int kvv_tokenizer_n_vocab(const kvv_tokenizer *t) { return t->n_vocab; }
int32_t kvv_tokenizer_bos(const kvv_tokenizer *t) { return t->bos; }
int32_t kvv_tokenizer_eos(const kvv_tokenizer *t) { return t->eos; }
const char *kvv_tokenizer_model(const kvv_tokenizer *t) { return t->model; }
