/*
 * tok_unicode.c — the Unicode facts the tokenizers need, computed the way
 * llama.cpp's src/unicode.cpp computes them so that token ids match:
 *
 *   - UTF-8 decoding that never fails: an invalid sequence becomes U+FFFD
 *     and consumes exactly one byte; overlong forms and surrogates decode to
 *     their value (llama.cpp does not reject them);
 *   - code point flags: the general category (from utf8proc) folded into
 *     llama.cpp's groups N, L, Z, M, P, S, C and "undefined" (Cn), plus the
 *     Unicode White_Space property (PropList.txt, a fixed list);
 *   - simple lowercase mapping and the first code point of the canonical
 *     decomposition (llama.cpp's NFD keeps only that one);
 *   - GPT-2's bytes_to_unicode table.
 *
 * utf8proc carries its own Unicode version (2.6 = Unicode 13); llama.cpp's
 * tables are generated from a newer UnicodeData.txt, so code points first
 * assigned after Unicode 13 count as "undefined" here (docs/tokenizer.md).
 */
#include "model/tokenizer_impl.h"

#include <stdlib.h>

#include <utf8proc.h>

size_t kvv_utf8_len(unsigned char c)
{
    static const unsigned char lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lookup[c >> 4];
}

/* One code point at s[*off] like llama.cpp's unicode_cpt_from_utf8;
 * @return false for an invalid sequence (nothing consumed). */
static bool decode_one(const unsigned char *s, size_t len, size_t *off, uint32_t *cpt)
{
    size_t o = *off;
    unsigned char b0 = s[o];
    if (!(b0 & 0x80)) {
        *cpt = b0;
        *off = o + 1;
        return true;
    }
    if (!(b0 & 0x40))
        return false;
    if (!(b0 & 0x20)) {
        if (o + 1 >= len || (s[o + 1] & 0xC0) != 0x80)
            return false;
        *cpt = ((uint32_t)(b0 & 0x1F) << 6) | (s[o + 1] & 0x3F);
        *off = o + 2;
        return true;
    }
    if (!(b0 & 0x10)) {
        if (o + 2 >= len || (s[o + 1] & 0xC0) != 0x80 || (s[o + 2] & 0xC0) != 0x80)
            return false;
        *cpt = ((uint32_t)(b0 & 0x0F) << 12) | ((uint32_t)(s[o + 1] & 0x3F) << 6) | (s[o + 2] & 0x3F);
        *off = o + 3;
        return true;
    }
    if (!(b0 & 0x08)) {
        if (o + 3 >= len || (s[o + 1] & 0xC0) != 0x80 || (s[o + 2] & 0xC0) != 0x80 ||
            (s[o + 3] & 0xC0) != 0x80)
            return false;
        *cpt = ((uint32_t)(b0 & 0x07) << 18) | ((uint32_t)(s[o + 1] & 0x3F) << 12) |
               ((uint32_t)(s[o + 2] & 0x3F) << 6) | (s[o + 3] & 0x3F);
        *off = o + 4;
        return true;
    }
    return false;
}

kvv_status kvv_utf8_decode(const char *s, size_t len, uint32_t **cpts, size_t *n, kvv_error *err)
{
    const unsigned char *u = (const unsigned char *)s;
    uint32_t *out = malloc((len ? len : 1) * sizeof *out);
    if (!out)
        return kvv_error_set(err, KVV_ERR_NOMEM, "tokenizer: out of memory decoding %zu bytes", len);
    size_t k = 0, off = 0;
    while (off < len) {
        size_t start = off;
        uint32_t c;
        if (!decode_one(u, len, &off, &c)) {
            c = 0xFFFD;
            off++;
        }
        if (c > 0x10FFFF) {
            free(out);
            return kvv_error_set(err, KVV_ERR_FORMAT,
                                 "text: byte %zu: UTF-8 sequence encodes U+%X, above U+10FFFF "
                                 "(llama.cpp's tokenizer rejects it too)",
                                 start, (unsigned)c);
        }
        out[k++] = c;
    }
    *cpts = out;
    *n = k;
    return KVV_OK;
}

int kvv_utf8_encode(uint32_t cpt, char *out)
{
    unsigned char *o = (unsigned char *)out;
    if (cpt <= 0x7F) {
        o[0] = (unsigned char)cpt;
        return 1;
    }
    if (cpt <= 0x7FF) {
        o[0] = (unsigned char)(0xC0 | ((cpt >> 6) & 0x1F));
        o[1] = (unsigned char)(0x80 | (cpt & 0x3F));
        return 2;
    }
    if (cpt <= 0xFFFF) {
        o[0] = (unsigned char)(0xE0 | ((cpt >> 12) & 0x0F));
        o[1] = (unsigned char)(0x80 | ((cpt >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cpt & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | ((cpt >> 18) & 0x07));
    o[1] = (unsigned char)(0x80 | ((cpt >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cpt >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cpt & 0x3F));
    return 4;
}

/* White_Space in Unicode's PropList.txt (the list llama.cpp hard-codes). */
static bool is_white_space(uint32_t c)
{
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

uint16_t kvv_cpt_flags(uint32_t cpt)
{
    uint16_t f;
    if (cpt > 0x10FFFF)
        return KVV_CPT_UNDEFINED;
    switch (utf8proc_category((utf8proc_int32_t)cpt)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO:
        f = KVV_CPT_LETTER; break;
    case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
        f = KVV_CPT_MARK; break;
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
        f = KVV_CPT_NUMBER; break;
    case UTF8PROC_CATEGORY_PC: case UTF8PROC_CATEGORY_PD: case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE: case UTF8PROC_CATEGORY_PI: case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
        f = KVV_CPT_PUNCTUATION; break;
    case UTF8PROC_CATEGORY_SM: case UTF8PROC_CATEGORY_SC: case UTF8PROC_CATEGORY_SK:
    case UTF8PROC_CATEGORY_SO:
        f = KVV_CPT_SYMBOL; break;
    case UTF8PROC_CATEGORY_ZS: case UTF8PROC_CATEGORY_ZL: case UTF8PROC_CATEGORY_ZP:
        f = KVV_CPT_SEPARATOR; break;
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
        f = KVV_CPT_CONTROL; break;
    default:
        f = KVV_CPT_UNDEFINED; break;
    }
    if (is_white_space(cpt))
        f |= KVV_CPT_WHITESPACE;
    return f;
}

uint32_t kvv_cpt_tolower(uint32_t cpt)
{
    if (cpt > 0x10FFFF)
        return cpt;
    return (uint32_t)utf8proc_tolower((utf8proc_int32_t)cpt);
}

uint32_t kvv_cpt_nfd_first(uint32_t cpt)
{
    utf8proc_int32_t buf[8];
    int last = 0;
    if (cpt > 0x10FFFF || (cpt >= 0xD800 && cpt <= 0xDFFF))
        return cpt;
    utf8proc_ssize_t n = utf8proc_decompose_char((utf8proc_int32_t)cpt, buf, 8, UTF8PROC_DECOMPOSE,
                                                 &last);
    if (n < 1 || n > 8)
        return cpt;
    return (uint32_t)buf[0];
}

/* bytes_to_unicode: printable Latin-1 bytes stand for themselves, the other
 * 68 bytes for U+0100.. in byte order. */
static bool byte_is_printable(unsigned b)
{
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

uint32_t kvv_byte_to_cpt(uint8_t b)
{
    if (byte_is_printable(b))
        return b;
    if (b <= 0x20)                  /* 0x00..0x20 -> U+0100..U+0120 */
        return 256u + b;
    if (b <= 0xA0)                  /* 0x7F..0xA0 -> U+0121..U+0142 */
        return 256u + 33u + (uint32_t)(b - 0x7F);
    return 256u + 67u;              /* 0xAD -> U+0143 */
}

int kvv_cpt_to_byte(uint32_t cpt)
{
    if (cpt < 256)
        return byte_is_printable(cpt) ? (int)cpt : -1;
    if (cpt <= 256 + 32)
        return (int)(cpt - 256);
    if (cpt <= 256 + 66)
        return (int)(0x7F + (cpt - 256 - 33));
    if (cpt == 256 + 67)
        return 0xAD;
    return -1;
}
