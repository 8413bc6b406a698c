/*
 * tokenizer.c — encoding and decoding entry points (tokenizer.h), as
 * llama.cpp's llama_vocab::impl::tokenize / token_to_piece / detokenize:
 *
 *   tokenize:   1. partition the text around special tokens: user-defined
 *                  tokens always (they are pre-tokenized before everything
 *                  else), control and unknown tokens only with parse_special;
 *                  longest token text first; LSTRIP/RSTRIP trim the spaces
 *                  beside a match;
 *               2. encode each raw fragment with the model's encoder (SPM
 *                  prepends a space to a fragment at the start or after a
 *                  special token when add_space_prefix is set);
 *               3. with add_special: BOS/EOS as add_bos/add_eos say (WPM:
 *                  always [CLS] ... [SEP]).
 *   detokenize: concatenate the pieces; control and unknown tokens give no
 *               text; the first piece loses one leading space when
 *               add_space_prefix is set (a leading BOS consumes that, as in
 *               llama.cpp, so [BOS, "▁Once"] decodes to " Once"); then the
 *               clean_spaces passes of BPE/WPM vocabularies (" ," -> ",",
 *               " 's" -> "'s", ...).
 */
#include "model/tokenizer_impl.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ partition */

typedef struct {
    int32_t token;     /* -1: raw text */
    size_t off, len;   /* raw text range */
} fragment;

typedef struct {
    fragment *v;
    size_t n, cap;
} frags;

static bool frag_push(frags *f, fragment x)
{
    if (f->n == f->cap) {
        size_t cap = f->cap ? 2 * f->cap : 16;
        fragment *v = realloc(f->v, cap * sizeof *v);
        if (!v)
            return false;
        f->v = v;
        f->cap = cap;
    }
    f->v[f->n++] = x;
    return true;
}

/* First occurrence of needle in hay: memchr (vectorized in libc) for the
 * first byte, then compare. */
static const char *find_bytes(const char *hay, size_t n, const char *needle, size_t m)
{
    if (m == 0 || m > n)
        return NULL;
    const char *end = hay + (n - m) + 1;
    for (const char *p = hay; p < end;) {
        p = memchr(p, needle[0], (size_t)(end - p));
        if (!p)
            return NULL;
        if (memcmp(p, needle, m) == 0)
            return p;
        p++;
    }
    return NULL;
}

static kvv_status partition(const kvv_tokenizer *t, const char *text, size_t len,
                            bool parse_special, frags *out, kvv_error *err)
{
    frags cur = {0}, nxt = {0};
    if (len > 0 && !frag_push(&cur, (fragment){-1, 0, len}))
        goto oom;
    for (int s = 0; s < t->n_special; s++) {
        int32_t id = t->special[s];
        uint32_t attr = t->attr[id];
        if (!parse_special && (attr & (KVV_TOK_ATTR_CONTROL | KVV_TOK_ATTR_UNKNOWN)))
            continue;
        const char *tt = t->text[id];
        size_t tl = t->text_len[id];
        nxt.n = 0;
        for (size_t f = 0; f < cur.n; f++) {
            fragment fr = cur.v[f];
            if (fr.token >= 0) {
                if (!frag_push(&nxt, fr))
                    goto oom;
                continue;
            }
            size_t base = fr.off, blen = fr.len;
            for (;;) {
                const char *m = find_bytes(text + base, blen, tt, tl);
                if (!m) {
                    if (blen > 0 && !frag_push(&nxt, (fragment){-1, base, blen}))
                        goto oom;
                    break;
                }
                size_t mo = (size_t)(m - text);
                if (mo > base) {
                    size_t ll = mo - base;
                    if (attr & KVV_TOK_ATTR_LSTRIP)
                        while (ll > 0 && isspace((unsigned char)text[base + ll - 1]))
                            ll--;
                    if (ll > 0 && !frag_push(&nxt, (fragment){-1, base, ll}))
                        goto oom;
                }
                if (!frag_push(&nxt, (fragment){id, 0, 0}))
                    goto oom;
                size_t end = base + blen;
                if (mo + tl >= end)
                    break;
                size_t ro = mo + tl, rl = end - ro;
                if (attr & KVV_TOK_ATTR_RSTRIP)
                    while (rl > 0 && isspace((unsigned char)text[ro])) {
                        ro++;
                        rl--;
                    }
                base = ro;
                blen = rl;
            }
        }
        frags tmp = cur;
        cur = nxt;
        nxt = tmp;
    }
    free(nxt.v);
    *out = cur;
    return KVV_OK;
oom:
    free(cur.v);
    free(nxt.v);
    return kvv_error_set(err, KVV_ERR_NOMEM, "tokenizer: out of memory");
}

/* ------------------------------------------------------------ tokenize */

kvv_status kvv_tokenize_ex(const kvv_tokenizer *t, const char *text, size_t len, bool add_special,
                           bool parse_special, int32_t **ids, int *n, kvv_error *err)
{
    *ids = NULL;
    *n = 0;
    if (len > (size_t)INT32_MAX / 4)
        return kvv_error_set(err, KVV_ERR_USAGE, "text: %zu bytes is too long to tokenize", len);
    frags fr = {0};
    kvv_tok_ids out = {0};
    char *buf = NULL;
    kvv_status st = partition(t, text, len, parse_special, &fr, err);
    if (st)
        return st;

    bool bos = add_special && (t->type == KVV_TOK_WPM || t->add_bos);
    bool eos = add_special && t->type != KVV_TOK_WPM && t->add_eos;
    bool sep = add_special && t->type == KVV_TOK_WPM;
    if ((bos && t->bos < 0) || (eos && t->eos < 0) || (sep && t->sep < 0)) {
        st = kvv_error_set(err, KVV_ERR_FORMAT, "%s: the vocabulary has no %s token to add",
                           t->path, bos && t->bos < 0 ? "BOS" : eos && t->eos < 0 ? "EOS" : "SEP");
        goto done;
    }
    if (bos && (st = kvv_tok_ids_push(&out, t->bos, err)))
        goto done;
    if (t->type == KVV_TOK_SPM && !(buf = malloc(len + 2))) {
        st = kvv_error_set(err, KVV_ERR_NOMEM, "tokenizer: out of memory");
        goto done;
    }
    bool prev_special = true;
    for (size_t i = 0; i < fr.n && !st; i++) {
        const fragment *f = &fr.v[i];
        if (f->token >= 0) {
            st = kvv_tok_ids_push(&out, f->token, err);
            prev_special = true;
            continue;
        }
        switch (t->type) {
        case KVV_TOK_SPM: {
            size_t bl = 0;
            if (t->add_space_prefix && prev_special)
                buf[bl++] = ' ';
            memcpy(buf + bl, text + f->off, f->len);
            st = kvv_tok_spm_encode(t, buf, bl + f->len, &out, err);
            prev_special = false;
            break;
        }
        case KVV_TOK_BPE:
            st = kvv_tok_bpe_encode(t, text + f->off, f->len, &out, err);
            break;
        case KVV_TOK_WPM:
            st = kvv_tok_wpm_encode(t, text + f->off, f->len, &out, err);
            break;
        }
    }
    if (st)
        goto done;
    if (eos && (st = kvv_tok_ids_push(&out, t->eos, err)))
        goto done;
    if (sep && (st = kvv_tok_ids_push(&out, t->sep, err)))
        goto done;
    if (!out.v && (st = kvv_tok_ids_push(&out, 0, err)) == KVV_OK)
        out.n = 0; /* an empty result is still a valid (freeable) array */
    if (st)
        goto done;
    *ids = out.v;
    *n = out.n;
    out.v = NULL;
done:
    free(out.v);
    free(fr.v);
    free(buf);
    return st;
}

kvv_status kvv_tokenize(const kvv_tokenizer *t, const char *text, size_t len, bool add_special,
                        int32_t **ids, int *n, kvv_error *err)
{
    return kvv_tokenize_ex(t, text, len, add_special, false, ids, n, err);
}

/* ------------------------------------------------------------ pieces */

typedef struct {
    char *p;
    size_t n, cap;
} bytes;

static bool put(bytes *b, const void *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p)
            return false;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return true;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The byte of a <0xXX> token, parsed like strtol(text.substr(3, 2), 16). */
static unsigned char byte_of(const char *s, uint32_t len)
{
    unsigned v = 0;
    for (uint32_t i = 3; i < 5 && i < len; i++) {
        int h = hexval(s[i]);
        if (h < 0)
            break;
        v = v * 16 + (unsigned)h;
    }
    return (unsigned char)v;
}

/* GPT-2 byte decoding of a token text (llama.cpp's llama_decode_text). */
static bool decode_bpe_text(const char *s, uint32_t len, bytes *b)
{
    uint32_t *cpts = NULL;
    size_t n = 0;
    kvv_error ignore = {0};
    if (kvv_utf8_decode(s, len, &cpts, &n, &ignore))
        return put(b, s, len); /* above U+10FFFF: cannot be a byte; keep the text */
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        int byte = kvv_cpt_to_byte(cpts[i]);
        if (byte >= 0) {
            unsigned char c = (unsigned char)byte;
            ok = put(b, &c, 1);
            continue;
        }
        char u8[4], hex[16];
        int k = kvv_utf8_encode(cpts[i], u8);
        ok = put(b, "[UNK_BYTE_0x", 12);
        for (int j = 0; j < k && ok; j++) {
            snprintf(hex, sizeof hex, "%02x", (unsigned char)u8[j]);
            ok = put(b, hex, 2);
        }
        ok = ok && put(b, s, len) && put(b, "]", 1);
    }
    free(cpts);
    return ok;
}

/* Append the piece of token id (llama.cpp's token_to_piece with
 * special=false), skipping up to lstrip leading spaces. */
static bool piece(const kvv_tokenizer *t, int32_t id, int lstrip, bytes *b)
{
    uint32_t attr = t->attr[id];
    const char *s = t->text[id];
    uint32_t len = t->text_len[id];
    size_t start = b->n;
    bool ok = true;
    if (attr & (KVV_TOK_ATTR_UNKNOWN | KVV_TOK_ATTR_CONTROL))
        return true;
    if (attr & KVV_TOK_ATTR_USER_DEFINED) {
        ok = put(b, s, len);
    } else if (attr & KVV_TOK_ATTR_NORMAL) {
        if (t->type == KVV_TOK_BPE) {
            ok = decode_bpe_text(s, len, b);
        } else {
            for (uint32_t i = 0; i < len && ok; i++) {
                if (i + 2 < len && memcmp(s + i, "\xe2\x96\x81", 3) == 0) {
                    ok = put(b, " ", 1);
                    i += 2;
                } else {
                    ok = put(b, s + i, 1);
                }
            }
        }
    } else if ((attr & KVV_TOK_ATTR_BYTE) && t->type != KVV_TOK_WPM) {
        unsigned char c = byte_of(s, len);
        ok = put(b, &c, 1);
    }
    if (ok && lstrip > 0 && b->n > start && b->p[start] == ' ') {
        memmove(b->p + start, b->p + start + 1, b->n - start - 1);
        b->n--;
        b->p[b->n] = '\0';
    }
    return ok;
}

int kvv_token_piece(const kvv_tokenizer *t, int32_t id, char *buf, size_t size)
{
    if (id < 0 || id >= t->n_vocab)
        return -1;
    bytes b = {0};
    if (!piece(t, id, 0, &b)) {
        free(b.p);
        return -1;
    }
    size_t k = b.n < size ? b.n : size;
    if (k > 0)
        memcpy(buf, b.p, k);
    if (k < size)
        buf[k] = '\0';
    int n = (int)b.n;
    free(b.p);
    return n;
}

/* ------------------------------------------------------------ detokenize */

/* llama.cpp's clean_spaces: " ?" " !" " ." " ," lose the space; a lone
 * apostrophe between spaces loses both; " 's" " 'm" " 're" " 've" lose it. */
static size_t clean_spaces(char *text, size_t total)
{
    size_t t1 = total, n = total ? 1 : 0;
    for (size_t i = 1; i < t1; i++) {
        char x = text[i];
        if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ','))
            n--;
        text[n++] = x;
    }
    size_t t2 = n;
    n = t2 ? 1 : 0;
    for (size_t i = 1; i < t2; i++) {
        char x = text[i];
        if (x == '\'' && i + 1 < t2 && text[i - 1] == ' ' && text[i + 1] == ' ') {
            n--;
            text[++i] = '\0';
        }
        text[n++] = x;
    }
    size_t t3 = n;
    n = t3 ? 1 : 0;
    for (size_t i = 1; i < t3; i++) {
        char x = text[i];
        if (text[i - 1] == ' ' && x == '\'' && i + 1 < t3) {
            char x1 = text[i + 1];
            if (x1 == 's' || x1 == 'm')
                n--;
            else if (i + 2 < t3 && ((x1 == 'r' && text[i + 2] == 'e') || (x1 == 'v' && text[i + 2] == 'e')))
                n--;
        }
        text[n++] = x;
    }
    return n;
}

kvv_status kvv_detokenize(const kvv_tokenizer *t, const int32_t *ids, int n, char **out,
                          size_t *len, kvv_error *err)
{
    *out = NULL;
    *len = 0;
    bytes b = {0};
    if (!put(&b, "", 0))
        return kvv_error_set(err, KVV_ERR_NOMEM, "tokenizer: out of memory");
    int lstrip = t->add_space_prefix ? 1 : 0;
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_vocab) {
            free(b.p);
            return kvv_error_set(err, KVV_ERR_USAGE, "token %d (position %d) is outside the "
                                 "vocabulary of %s (%d tokens)", ids[i], i, t->path, t->n_vocab);
        }
        if (!piece(t, ids[i], lstrip, &b)) {
            free(b.p);
            return kvv_error_set(err, KVV_ERR_NOMEM, "tokenizer: out of memory");
        }
        lstrip = 0;
    }
    if (t->clean_spaces) {
        b.n = clean_spaces(b.p, b.n);
        b.p[b.n] = '\0';
    }
    *out = b.p;
    *len = b.n;
    return KVV_OK;
}
