/*
 * tokenizer_impl.h — private to model/tok_*.c and model/tokenizer.c.
 *
 * The tokenizer is split by concept:
 *   tok_vocab.c    metadata -> kvv_tokenizer (token table, hash maps, special
 *                  ids, add_bos/add_eos, per-token attributes)
 *   tok_unicode.c  llama.cpp-compatible UTF-8 decoding, code point flags
 *                  (utf8proc), GPT-2 bytes_to_unicode
 *   tok_pretok.c   the BPE pre-tokenizers: llama.cpp's regex lists per
 *                  tokenizer.ggml.pre, run with PCRE2 or the two hand-written
 *                  splitters llama.cpp itself uses for the GPT-2 and Llama-3
 *                  patterns
 *   tok_spm.c, tok_bpe.c, tok_wpm.c   the three tokenizer models
 *   tokenizer.c    kvv_tokenize (special-token partition, BOS/EOS),
 *                  kvv_detokenize, kvv_token_piece
 */
#ifndef KVV_TOKENIZER_IMPL_H
#define KVV_TOKENIZER_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "model/tokenizer.h"

typedef enum { KVV_TOK_SPM, KVV_TOK_BPE, KVV_TOK_WPM } kvv_tok_type;

/* Most tokens (and BPE merges) a vocabulary may have: 2^24, the bound
 * model/arch.c puts on every width. Real vocabularies stop near 2^18; the
 * bound keeps a hostile token count from sizing the tables. */
#define KVV_TOK_MAX_VOCAB (1 << 24)

/* Token attributes, the values of llama.cpp's llama_token_attr. */
enum {
    KVV_TOK_ATTR_UNDEFINED = 0,
    KVV_TOK_ATTR_UNKNOWN = 1 << 0,
    KVV_TOK_ATTR_UNUSED = 1 << 1,
    KVV_TOK_ATTR_NORMAL = 1 << 2,
    KVV_TOK_ATTR_CONTROL = 1 << 3,
    KVV_TOK_ATTR_USER_DEFINED = 1 << 4,
    KVV_TOK_ATTR_BYTE = 1 << 5,
    KVV_TOK_ATTR_LSTRIP = 1 << 7,
    KVV_TOK_ATTR_RSTRIP = 1 << 8
};

/* ------------------------------------------------------------ hash map
 * Open addressing, linear probing, power-of-two capacity, FNV-1a hash.
 * Keys are borrowed byte strings (they live in the tokenizer's arenas). */
typedef struct {
    const char *key;   /* NULL = empty slot */
    uint32_t len;      /* key length in bytes */
    uint32_t hash;
    int32_t value;
} kvv_tok_slot;

typedef struct {
    kvv_tok_slot *slots;
    size_t cap;        /* power of two, > 2 * count */
    size_t count;
} kvv_tok_map;

uint32_t kvv_tok_hash(const char *s, size_t len);
/* Insert if absent (the first value for a key wins, like std::map::emplace).
 * The map must have been sized for all insertions.
 * @return -1 if inserted, else the value already stored for key. */
int32_t kvv_tok_map_put(kvv_tok_map *m, const char *key, size_t len, int32_t value);
/* @return the value, or -1 if absent. */
int32_t kvv_tok_map_get(const kvv_tok_map *m, const char *key, size_t len);

/* ------------------------------------------------------------ pre-tokenizer */
typedef struct kvv_pretok kvv_pretok;

/* Look up tokenizer.ggml.pre (NULL or "" = llama.cpp's "default").
 * @return KVV_OK and fills the flags llama.cpp attaches to the name, or
 * KVV_ERR_UNSUPPORTED for a name current llama.cpp rejects. */
typedef struct {
    bool clean_spaces;   /* detokenize: llama.cpp's clean_spaces passes */
    bool ignore_merges;  /* a pre-token that is a whole token skips merges */
    bool add_bos;        /* model default before tokenizer.ggml.add_bos_token */
    bool add_sep;
    bool bos_null;       /* the name disables the default BOS id */
} kvv_pretok_flags;

kvv_status kvv_pretok_open(const char *name, kvv_pretok **out, kvv_pretok_flags *flags,
                           kvv_error *err);
void kvv_pretok_free(kvv_pretok *p);
/* The i-th tokenizer.ggml.pre name kvverify knows, or NULL past the end. */
const char *kvv_pretok_name(int i);

/* Split len bytes of text into pre-tokens, each already mapped through GPT-2
 * bytes_to_unicode (as unicode_regex_split does). *words is one malloc'ed
 * buffer of NUL-separated words; *n_words of them. */
kvv_status kvv_pretok_split(const kvv_pretok *p, const char *text, size_t len, char **words,
                            size_t *words_len, int *n_words, kvv_error *err);

/* ------------------------------------------------------------ unicode */
/* Code point flags, the values of llama.cpp's unicode_cpt_flags. */
enum {
    KVV_CPT_UNDEFINED = 0x0001,
    KVV_CPT_NUMBER = 0x0002,
    KVV_CPT_LETTER = 0x0004,
    KVV_CPT_SEPARATOR = 0x0008,
    KVV_CPT_MARK = 0x0010,
    KVV_CPT_PUNCTUATION = 0x0020,
    KVV_CPT_SYMBOL = 0x0040,
    KVV_CPT_CONTROL = 0x0080,
    KVV_CPT_CATEGORIES = 0x00FF,
    KVV_CPT_WHITESPACE = 0x0100
};

/* Flags of a code point (category from utf8proc; White_Space from the
 * Unicode PropList, as llama.cpp's tables). Never 0. */
uint16_t kvv_cpt_flags(uint32_t cpt);
uint32_t kvv_cpt_tolower(uint32_t cpt);
/* First code point of the canonical decomposition (llama.cpp's
 * unicode_cpts_normalize_nfd keeps only that). */
uint32_t kvv_cpt_nfd_first(uint32_t cpt);
/* Length of the UTF-8 sequence a lead byte announces (1..4; 1 for stray
 * continuation bytes), llama.cpp's unicode_len_utf8. */
size_t kvv_utf8_len(unsigned char c);
/* Decode like llama.cpp's unicode_cpts_from_utf8: an invalid sequence
 * becomes U+FFFD and consumes one byte. *cpts malloc'ed (len entries max). */
kvv_status kvv_utf8_decode(const char *s, size_t len, uint32_t **cpts, size_t *n, kvv_error *err);
/* Encode cpt (<= 0x10FFFF; surrogates pass through) into out[4]; @return bytes. */
int kvv_utf8_encode(uint32_t cpt, char *out);
/* GPT-2 bytes_to_unicode: the code point byte b stands for. */
uint32_t kvv_byte_to_cpt(uint8_t b);
/* Inverse: @return the byte, or -1 if cpt stands for no byte. */
int kvv_cpt_to_byte(uint32_t cpt);

/* ------------------------------------------------------------ the tokenizer */
struct kvv_tokenizer {
    kvv_tok_type type;
    char path[256];            /* the GGUF file's name, for messages */
    char model[64];            /* tokenizer.ggml.model */
    char pre[128];             /* tokenizer.ggml.pre ("" if absent) */
    int n_vocab;
    char *arena;               /* all token texts, each NUL-terminated */
    const char **text;         /* [n_vocab] into arena */
    uint32_t *text_len;        /* [n_vocab] */
    float *score;              /* [n_vocab] */
    uint32_t *attr;            /* [n_vocab] KVV_TOK_ATTR_* */
    kvv_tok_map vocab;         /* text -> id */
    char *merge_arena;         /* BPE: merges as "left right", NUL-terminated */
    kvv_tok_map merges;        /* BPE: "left right" -> rank */
    kvv_pretok *pretok;        /* BPE only */
    int32_t bos, eos, unk, sep, pad; /* -1 = none */
    bool add_bos, add_eos, add_sep;
    bool add_space_prefix;     /* SPM: prepend ' ' to text after a special token */
    bool clean_spaces;
    bool ignore_merges;
    bool lowercase, strip_accents; /* WPM normalizer */
    int max_token_len;         /* bytes */
    int32_t *special;          /* ids with CONTROL|USER_DEFINED|UNKNOWN, longest first */
    int n_special;
};

/* A growable id list used by the encoders. */
typedef struct {
    int32_t *v;
    int n, cap;
} kvv_tok_ids;

kvv_status kvv_tok_ids_push(kvv_tok_ids *ids, int32_t id, kvv_error *err);

/* Encoders: append the ids of one raw-text fragment to out. */
kvv_status kvv_tok_spm_encode(const kvv_tokenizer *t, const char *text, size_t len,
                              kvv_tok_ids *out, kvv_error *err);
kvv_status kvv_tok_bpe_encode(const kvv_tokenizer *t, const char *text, size_t len,
                              kvv_tok_ids *out, kvv_error *err);
kvv_status kvv_tok_wpm_encode(const kvv_tokenizer *t, const char *text, size_t len,
                              kvv_tok_ids *out, kvv_error *err);

#endif
