/*
 * cmd_tokenize.c — `kvverify tokenize`: text to token ids (and back) with a
 * model's own tokenizer, the same ids llama.cpp's llama_tokenize gives.
 *
 *   kvverify tokenize MODEL.gguf TEXT [--raw] [--special] [--json [FILE|-]]
 *   kvverify tokenize MODEL.gguf -f FILE [...]        (FILE "-" = stdin)
 *   kvverify tokenize MODEL.gguf --decode "1,403,407" [--json [FILE|-]]   (or -f FILE of ids)
 *
 * Text output: the ids on one line, separated by spaces. --decode prints the
 * decoded text instead, then a newline (--json's "text" has the exact
 * bytes). --json: one object
 *   {"model": PATH, "tokenizer": "llama", "tokens": [...], "pieces": [...]}
 * (--decode adds "text"). A piece that is not valid UTF-8 (a lone byte
 * token) is written with each byte >= 0x80 as the code point U+00XX.
 *
 * Errors: a bad option, an unreadable file or a malformed model exit 2 with a
 * one-line message; a tokenizer kvverify does not implement exits 77.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "cli/output_opts.h"
#include "common/read_file.h"
#include "model/gguf.h"
#include "model/tokenizer.h"

static void tokenize_usage(FILE *f)
{
    fprintf(f,
            "usage: kvverify tokenize MODEL.gguf (TEXT | -f FILE) [--raw] [--special]\n"
            "                         [--json [FILE|-]]\n"
            "       kvverify tokenize MODEL.gguf --decode (IDS | -f FILE) [--json [FILE|-]]\n\n"
            "Tokenize TEXT (or the bytes of FILE; '-' reads stdin) with the model's\n"
            "tokenizer (tokenizer.ggml.*: SentencePiece 'llama', byte-level BPE 'gpt2' with\n"
            "its pre-tokenizer, WordPiece 'bert') and print the token ids on one line,\n"
            "separated by spaces. BOS/EOS are added as the vocabulary's metadata says\n"
            "(tokenizer.ggml.add_bos_token, add_eos_token and llama.cpp's defaults).\n\n"
            "options:\n"
            "  -f, --file FILE   tokenize the contents of FILE instead of TEXT\n"
            "  --raw             add no BOS/EOS (llama.cpp's add_special=false)\n"
            "  --special         turn control-token texts such as <s> into those tokens\n"
            "                    (llama.cpp's parse_special=true)\n"
            "  --decode          the input is token ids (separated by commas, spaces or\n"
            "                    newlines): print their text instead, and a newline\n"
            "  --json [FILE|-]   one JSON object: model, tokenizer, tokens, pieces (and\n"
            "                    text with --decode) to FILE (--json=FILE), or alone / - to\n"
            "                    stdout\n"
            "  -h, --help        this help\n\n"
            "exit codes: 0 done, 2 bad usage or unreadable/malformed file,\n"
            "77 the model's tokenizer is not supported\n");
}

/* Ids separated by commas and/or spaces. */
static bool parse_ids(kvv_opts *o, const char *s, int32_t **ids, int *n)
{
    size_t cap = 1;
    for (const char *p = s; *p; p++)
        cap += (*p == ',' || *p == ' ' || *p == '\n' || *p == '\t' || *p == '\r');
    *ids = malloc(cap * sizeof **ids);
    *n = 0;
    if (!*ids) {
        kvv_opts_error(o, "option --decode: out of memory");
        return false;
    }
    const char *p = s;
    while (*p) {
        while (*p == ',' || *p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
            p++;
        if (!*p)
            break;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < INT32_MIN || v > INT32_MAX ||
            (*end && *end != ',' && *end != ' ' && *end != '\n' && *end != '\t' && *end != '\r')) {
            kvv_opts_error(o, "option --decode: item %d ('%.20s') is not a token id", *n + 1, p);
            free(*ids);
            *ids = NULL;
            return false;
        }
        (*ids)[(*n)++] = (int32_t)v;
        p = end;
    }
    return true;
}

static bool valid_utf8(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3
                 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (k == 0 || i + k > n || (k == 2 && c < 0xC2))
            return false;
        for (size_t j = 1; j < k; j++)
            if ((s[i + j] & 0xC0) != 0x80)
                return false;
        i += k;
    }
    return true;
}

/* A JSON string of arbitrary bytes: as is when valid UTF-8, else each byte
 * >= 0x80 as U+00XX. */
static json_t *json_bytes(const char *s, size_t n)
{
    if (valid_utf8((const unsigned char *)s, n))
        return json_stringn(s, n);
    char *u = malloc(2 * n + 1);
    if (!u)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x80) {
            u[k++] = (char)c;
        } else {
            u[k++] = (char)(0xC0 | (c >> 6));
            u[k++] = (char)(0x80 | (c & 0x3F));
        }
    }
    json_t *j = json_stringn(u, k);
    free(u);
    return j;
}

/* The JSON object to --json's FILE or stdout. @return the exit code. */
static int write_json(const char *path, const char *model, const kvv_tokenizer *t,
                      const int32_t *ids, int n, const char *text, size_t text_len)
{
    json_t *root = json_object(), *toks = json_array(), *pieces = json_array();
    if (!root || !toks || !pieces)
        return KVV_EXIT_BAD_INPUT;
    json_object_set_new(root, "model", json_string(model));
    json_object_set_new(root, "tokenizer", json_string(kvv_tokenizer_model(t)));
    json_object_set_new(root, "n_tokens", json_integer(n));
    for (int i = 0; i < n; i++) {
        json_array_append_new(toks, json_integer(ids[i]));
        char small[256];
        int k = kvv_token_piece(t, ids[i], small, sizeof small);
        if (k < 0) {
            json_array_append_new(pieces, json_null());
        } else if ((size_t)k <= sizeof small) {
            json_array_append_new(pieces, json_bytes(small, (size_t)k));
        } else {
            char *big = malloc((size_t)k);
            if (big && kvv_token_piece(t, ids[i], big, (size_t)k) == k)
                json_array_append_new(pieces, json_bytes(big, (size_t)k));
            else
                json_array_append_new(pieces, json_null());
            free(big);
        }
    }
    json_object_set_new(root, "tokens", toks);
    json_object_set_new(root, "pieces", pieces);
    if (text)
        json_object_set_new(root, "text", json_bytes(text, text_len));
    int rc = kvv_output_write_json(path, root, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(root);
    return rc;
}

/* tokenize's own options. */
typedef struct {
    const char *model, *text, *file;
    bool raw, special, decode;
} tokenize_args;

static bool own_option(void *state, kvv_opts *o)
{
    tokenize_args *a = state;
    if (kvv_opts_flag(o, "--raw")) {
        a->raw = true;
    } else if (kvv_opts_flag(o, "--special")) {
        a->special = true;
    } else if (kvv_opts_value(o, "-f") || kvv_opts_value(o, "--file")) {
        a->file = o->value;
    } else if (kvv_opts_flag(o, "--decode")) {
        a->decode = true;
    } else if (kvv_opts_positional(o) && !a->model) {
        a->model = o->arg;
    } else if (kvv_opts_positional(o) && !a->text) {
        a->text = o->arg;
    } else {
        return false;
    }
    return true;
}

int kvv_cmd_tokenize(int argc, char **argv)
{
    kvv_opts o;
    kvv_opts_init(&o, "tokenize", argc, argv);
    kvv_output_cli output;
    kvv_output_cli_init(&output, "tokenize", KVV_OUT_JSON);
    tokenize_args a = {0};
    const kvv_opt_group groups[] = {kvv_output_cli_group(&output), {own_option, NULL, &a}};
    int code = kvv_opts_parse(&o, tokenize_usage, groups, 2);
    if (code != KVV_OPTS_RUN)
        return code;
    const char *model = a.model, *text = a.text, *file = a.file;
    const bool raw = a.raw, special = a.special, decode = a.decode;
    const bool text_out = !output.stdout_taken;
    const char *json = output.json_path;
    if (!model) {
        kvv_opts_error(&o, "missing MODEL.gguf");
        return KVV_EXIT_BAD_INPUT;
    }
    int sources = (text != NULL) + (file != NULL);
    if (sources != 1) {
        kvv_opts_error(&o, sources ? "give TEXT or -f FILE, not both"
                                   : "missing TEXT (or -f FILE)");
        return KVV_EXIT_BAD_INPUT;
    }
    char *buf = NULL;
    size_t len = 0;
    if (file) {
        kvv_error rerr = {0};
        if (kvv_read_file(file, 0, &buf, &len, &rerr)) {
            fprintf(stderr, "kvverify tokenize: %s\n", rerr.msg);
            return kvv_exit_code(rerr.status);
        }
        text = buf;
    } else {
        len = strlen(text);
    }
    int32_t *ids = NULL;
    int n = 0;
    if (decode) {
        if (memchr(text, '\0', len)) {
            kvv_opts_error(&o, "--decode: %s holds a NUL byte, not token ids", file ? file : "TEXT");
            free(buf);
            return KVV_EXIT_BAD_INPUT;
        }
        if (!parse_ids(&o, text, &ids, &n)) {
            free(buf);
            return KVV_EXIT_BAD_INPUT;
        }
    }

    kvv_error err = {0};
    kvv_gguf *g = NULL;
    kvv_tokenizer *t = NULL;
    char *out = NULL;
    size_t out_len = 0;
    int rc = KVV_EXIT_BAD_INPUT;
    if (kvv_gguf_open(model, &g, &err) || kvv_tokenizer_open(g, &t, &err)) {
        rc = kvv_cli_fail(&err);
        goto done;
    }
    if (decode) {
        if (kvv_detokenize(t, ids, n, &out, &out_len, &err)) {
            rc = kvv_cli_fail(&err);
            goto done;
        }
        rc = KVV_EXIT_PASS;
        if (text_out) {
            fwrite(out, 1, out_len, stdout);
            putchar('\n'); /* a line, like the ids; --json's "text" has the exact bytes */
        }
        if (json)
            rc = write_json(json, model, t, ids, n, out, out_len);
        goto done;
    }
    if (kvv_tokenize_ex(t, text, len, !raw, special, &ids, &n, &err)) {
        rc = kvv_cli_fail(&err);
        goto done;
    }
    rc = KVV_EXIT_PASS;
    if (text_out) {
        for (int i = 0; i < n; i++)
            printf(i ? " %d" : "%d", ids[i]);
        putchar('\n');
    }
    if (json)
        rc = write_json(json, model, t, ids, n, NULL, 0);
done:
    if (fflush(stdout) != 0 && rc == KVV_EXIT_PASS) {
        fprintf(stderr, "kvverify tokenize: error writing output\n");
        rc = KVV_EXIT_BAD_INPUT;
    }
    free(ids);
    free(buf);
    free(out);
    kvv_tokenizer_free(t);
    kvv_gguf_close(g);
    return rc;
}
