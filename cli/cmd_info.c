/*
 * cmd_info.c — `kvverify info`: what is in a GGUF file, and what a model
 * shape costs per token.
 *
 *   kvverify info MODEL.gguf [--json [FILE|-]]
 *   kvverify info --shape NAME [--vocab N] [--json [FILE|-]]
 *   kvverify info --cpu [--json [FILE|-]]
 *
 * Prints the metadata (long arrays summarized), every tensor (name, type,
 * shape, bytes), totals per type, the architecture summary (hyperparameters
 * as kvverify reads them) and the per-token memory table: K+V bytes per
 * token over all layers (f32/f16/bf16 storage) against one residual vector
 * per token and a residual per layer per token. With --cpu: the cpu
 * engine's kernel tables this CPU can run and the one it runs by default.
 *
 * info is a file viewer: a file of an unsupported architecture, or a
 * vocabulary-only file, is still shown (exit 0) with a note. A file the
 * reader rejects gives its one-line message and exit 2; a model whose
 * tensors do not bind (missing or misshaped) is shown, then the binding
 * error, exit 2.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "cli/output_opts.h"
#include "engine/cpu/cpu_isa.h"
#include "model/arch.h"
#include "model/gguf.h"
#include "model/shapes.h"

#define ARRAY_SHOW 6     /* elements of a long array shown in text */
#define ARRAY_SHOW_JSON 8
#define STRING_SHOW 100  /* characters of a long string shown in text */

static void info_usage(FILE *f)
{
    fprintf(f,
            "usage: kvverify info MODEL.gguf [--json [FILE|-]]\n"
            "       kvverify info --shape NAME [--vocab N] [--json [FILE|-]]\n"
            "       kvverify info --cpu [--json [FILE|-]]\n\n"
            "Show a GGUF file: metadata (long arrays summarized), tensors (name, type,\n"
            "shape, bytes), totals per type, the architecture as kvverify reads it, and\n"
            "the per-token memory table: K+V bytes per token over all layers (f32, f16,\n"
            "bf16 storage) against one residual vector per token and a residual per\n"
            "layer per token. With --shape, the architecture and memory of a named shape\n"
            "(see kvverify synth --list-shapes) without a file. With --cpu, the cpu\n"
            "engine's kernel tables (generic, avx2, avx512: each its own reduction order)\n"
            "this CPU can run, and the one --engine cpu runs unless --isa says otherwise;\n"
            "KVV_CPU_MAX_ISA=generic|avx2 in the environment hides the wider ones.\n\n"
            "options:\n"
            "  --shape NAME   describe a named shape instead of a file\n"
            "  --cpu          the kernel tables this CPU can run, and the default\n"
            "  --vocab N      vocabulary size for --shape (default: the shape's)\n"
            "  --json [FILE|-] one JSON object to FILE (--json=FILE), or alone / - to stdout\n"
            "  -h, --help     this help\n\n"
            "exit codes: 0 shown (also for an unsupported architecture, which is noted),\n"
            "2 unreadable or malformed file, or tensors that do not match the architecture\n");
}

/* ------------------------------------------------------------ text helpers */

/* Length of the valid UTF-8 sequence at s[0..n), or 0 if invalid. */
static int utf8_len(const unsigned char *s, uint64_t n)
{
    int len = s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 && s[0] < 0xe0 ? 2 : 0;
    if (len == 0 || (uint64_t)len > n)
        return 0;
    for (int i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] > 0x9f) ||
        (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] > 0x8f))
        return 0; /* overlong, surrogate or beyond U+10FFFF */
    return len;
}

/* Print len bytes of s quoted, escaping control bytes and invalid UTF-8 as
 * \xNN; at most max bytes (0 = all). */
static void put_str(const char *s, uint64_t len, uint64_t max)
{
    const unsigned char *u = (const unsigned char *)s;
    uint64_t n = max && len > max ? max : len;
    putchar('"');
    for (uint64_t i = 0; i < n;) {
        unsigned char c = u[i];
        if (c >= 0x80) {
            int k = utf8_len(u + i, n - i);
            if (k) {
                fwrite(u + i, 1, (size_t)k, stdout);
                i += (uint64_t)k;
            } else {
                printf("\\x%02x", c);
                i++;
            }
            continue;
        }
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c == '\n')
            fputs("\\n", stdout);
        else if (c < 0x20 || c == 0x7f)
            printf("\\x%02x", c);
        else
            putchar(c);
        i++;
    }
    putchar('"');
    if (n < len)
        printf("... (%llu bytes)", (unsigned long long)len);
}

static void put_scalar(kvv_gguf_type t, const kvv_gguf_kv *kv)
{
    switch (t) {
    case KVV_GGUF_UINT8: case KVV_GGUF_UINT16: case KVV_GGUF_UINT32: case KVV_GGUF_UINT64:
        printf("%llu", (unsigned long long)kv->v.u64);
        break;
    case KVV_GGUF_INT8: case KVV_GGUF_INT16: case KVV_GGUF_INT32: case KVV_GGUF_INT64:
        printf("%lld", (long long)kv->v.i64);
        break;
    case KVV_GGUF_FLOAT32: case KVV_GGUF_FLOAT64:
        printf("%.9g", kv->v.f64);
        break;
    case KVV_GGUF_BOOL:
        fputs(kv->v.u64 ? "true" : "false", stdout);
        break;
    case KVV_GGUF_STRING:
        put_str(kv->v.str.ptr, kv->v.str.len, STRING_SHOW);
        break;
    default:
        fputs("?", stdout);
    }
}

static bool is_int_type(kvv_gguf_type t)
{
    return t == KVV_GGUF_UINT8 || t == KVV_GGUF_INT8 || t == KVV_GGUF_UINT16 ||
           t == KVV_GGUF_INT16 || t == KVV_GGUF_UINT32 || t == KVV_GGUF_INT32 ||
           t == KVV_GGUF_UINT64 || t == KVV_GGUF_INT64 || t == KVV_GGUF_BOOL;
}

static void put_array_elem(const kvv_gguf_kv *kv, uint64_t i)
{
    if (kv->arr_type == KVV_GGUF_STRING)
        put_str(kv->arr_str[i].ptr, kv->arr_str[i].len, 40);
    else if (kv->arr_type == KVV_GGUF_UINT64)
        printf("%llu", (unsigned long long)kvv_gguf_arr_i64(kv, i));
    else if (is_int_type(kv->arr_type))
        printf("%lld", (long long)kvv_gguf_arr_i64(kv, i));
    else
        printf("%.9g", kvv_gguf_arr_f64(kv, i));
}

static void print_metadata(const kvv_gguf *g)
{
    printf("\nmetadata (%llu keys):\n", (unsigned long long)g->n_kv);
    size_t w = 0;
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (strlen(g->kv[i].key) > w)
            w = strlen(g->kv[i].key);
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const kvv_gguf_kv *kv = &g->kv[i];
        printf("  %-*s ", (int)w, kv->key);
        if (kv->type == KVV_GGUF_ARRAY) {
            printf("array[%s] x %llu: ", kvv_gguf_type_name(kv->arr_type),
                   (unsigned long long)kv->arr_n);
            uint64_t n = kv->arr_n < ARRAY_SHOW ? kv->arr_n : ARRAY_SHOW;
            for (uint64_t j = 0; j < n; j++) {
                if (j)
                    fputs(", ", stdout);
                put_array_elem(kv, j);
            }
            if (n < kv->arr_n)
                fputs(", ...", stdout);
        } else {
            printf("%s ", kvv_gguf_type_name(kv->type));
            put_scalar(kv->type, kv);
        }
        putchar('\n');
    }
}

static void shape_text(const kvv_gguf_tensor *t, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "{");
    for (uint32_t d = 0; d < t->n_dims && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", d ? ", " : "", (long long)t->ne[d]);
    if (k < n)
        snprintf(buf + k, n - k, "}");
}

typedef struct {
    uint64_t count[KVV_TYPE_COUNT];
    uint64_t bytes[KVV_TYPE_COUNT];
    uint64_t total;
} type_totals;

static void count_types(const kvv_gguf *g, type_totals *tt)
{
    memset(tt, 0, sizeof *tt);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const kvv_gguf_tensor *t = &g->tensors[i];
        if ((unsigned)t->type < KVV_TYPE_COUNT) {
            tt->count[t->type]++;
            tt->bytes[t->type] += t->nbytes;
        }
        tt->total += t->nbytes;
    }
}

static void print_tensors(const kvv_gguf *g)
{
    printf("\ntensors (%llu):\n", (unsigned long long)g->n_tensors);
    size_t w = 4;
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (strlen(g->tensors[i].name) > w)
            w = strlen(g->tensors[i].name);
    if (g->n_tensors)
        printf("  %-*s %-6s %-22s %12s\n", (int)w, "name", "type", "shape", "bytes");
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const kvv_gguf_tensor *t = &g->tensors[i];
        char sh[96];
        shape_text(t, sh, sizeof sh);
        printf("  %-*s %-6s %-22s %12llu\n", (int)w, t->name, kvv_type_name(t->type), sh,
               (unsigned long long)t->nbytes);
    }
    type_totals tt;
    count_types(g, &tt);
    printf("  by type:");
    bool any = false;
    for (int ty = 0; ty < KVV_TYPE_COUNT; ty++) {
        if (!tt.count[ty])
            continue;
        printf("%s %llu %s (%llu bytes)", any ? "," : "", (unsigned long long)tt.count[ty],
               kvv_type_name((uint32_t)ty), (unsigned long long)tt.bytes[ty]);
        any = true;
    }
    printf("%s\n  total: %llu tensors, %llu bytes of tensor data\n", any ? "" : " none",
           (unsigned long long)g->n_tensors, (unsigned long long)tt.total);
}

/* "136 KiB", "5 KiB", "1.5 KiB", "12 bytes" */
static void fmt_bytes(uint64_t b, char *buf, size_t n)
{
    if (b < 1024)
        snprintf(buf, n, "%llu bytes", (unsigned long long)b);
    else if (b % 1024 == 0)
        snprintf(buf, n, "%llu KiB", (unsigned long long)(b / 1024));
    else
        snprintf(buf, n, "%.6g KiB", (double)b / 1024.0);
}

static void print_hparams(const kvv_hparams *hp, bool has_freqs)
{
    printf("  layers %d, n_embd %d, heads %d / %d KV, head dim %d", hp->n_layer, hp->n_embd,
           hp->n_head, hp->n_head_kv, hp->head_dim);
    if (hp->head_dim_v != hp->head_dim)
        printf(" (V %d)", hp->head_dim_v);
    printf(", n_ff %d, vocab %d, context %d\n", hp->n_ff, hp->n_vocab, hp->n_ctx_train);
    printf("  rope: %s, base %.9g", hp->rope_type == KVV_ROPE_NORM ? "interleaved pairs (norm)" : "neox halves",
           (double)hp->rope_base);
    if (hp->rope_base_swa != hp->rope_base)
        printf(" (local layers %.9g)", (double)hp->rope_base_swa);
    printf(", %d dims%s\n", hp->n_rot, has_freqs ? ", rope_freqs factors" : "");
    printf("  rms eps %.9g, query scale %.9g, embedding scale %.9g, %s FFN\n", (double)hp->norm_eps,
           (double)hp->query_scale, (double)hp->embd_scale,
           hp->act == KVV_ACT_SILU ? "SiLU-gated" : "GELU(tanh)-gated");
    if (hp->attn_softcap > 0 || hp->final_softcap > 0)
        printf("  soft-caps: attention %.9g, final %.9g\n", (double)hp->attn_softcap,
               (double)hp->final_softcap);
    if (hp->n_swa > 0) {
        printf("  sliding window %d, period %d, local layers:", hp->n_swa, hp->swa_period);
        int shown = 0;
        for (int il = 0; il < hp->n_layer && il < KVV_MAX_LAYERS; il++)
            if (hp->swa_layer[il])
                printf("%s%d", shown++ ? "," : " ", il);
        printf("%s\n", shown ? "" : " none");
    }
    printf("  structure:%s%s%s%s%s output %s\n", hp->has_qkv_bias ? " q/k/v biases," : "",
           hp->has_qk_norm ? " q/k norms," : "", hp->has_post_norms ? " post norms," : "",
           hp->fused_qkv ? " fused qkv," : "", hp->fused_gate_up ? " fused gate|up," : "",
           hp->tied_output ? "tied to token_embd" : "separate (output.weight)");
}

static void print_memory(const kvv_hparams *hp)
{
    kvv_token_memory m;
    kvv_token_memory_of(hp, &m);
    char a[32], b[32], c[32];
    printf("\nper-token memory (bytes per token of context):\n");
    fmt_bytes(m.kv_f32, a, sizeof a);
    fmt_bytes(m.kv_f16, b, sizeof b);
    fmt_bytes(m.kv_bf16, c, sizeof c);
    char label[48];
    snprintf(label, sizeof label, "K+V, all %d layer%s:", hp->n_layer, hp->n_layer == 1 ? "" : "s");
    printf("  %-27s f32 %-12s f16 %-12s bf16 %s\n", label, a, b, c);
    fmt_bytes(m.resid_f32, a, sizeof a);
    fmt_bytes(m.resid_bf16, c, sizeof c);
    printf("  one residual vector:        f32 %-12s                  bf16 %s\n", a, c);
    fmt_bytes(m.resid_layers_f32, a, sizeof a);
    fmt_bytes(m.resid_layers_bf16, c, sizeof c);
    printf("  a residual per layer:       f32 %-12s                  bf16 %s\n", a, c);
    printf("  K+V / one residual:         %.1fx (bf16 vs bf16; the same for f32 vs f32)\n",
           (double)m.kv_bf16 / (double)m.resid_bf16);
    printf("  K+V / per-layer residuals:  %.2fx\n", (double)m.kv_bf16 / (double)m.resid_layers_bf16);
}

/* ------------------------------------------------------------ JSON */

/* A malloc'ed NUL-terminated copy of s[0..len) that is valid UTF-8: bytes
 * of invalid sequences (and NULs) become '?'. NULL on OOM. */
static char *utf8_clean(const char *s, uint64_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    char *c = malloc((size_t)len + 1);
    if (!c)
        return NULL;
    for (uint64_t i = 0; i < len;) {
        int k = u[i] >= 0x80 ? utf8_len(u + i, len - i) : 1;
        if (k == 0 || u[i] == 0) {
            c[i++] = '?';
            continue;
        }
        memcpy(c + i, u + i, (size_t)k);
        i += (uint64_t)k;
    }
    c[len] = '\0';
    return c;
}

static json_t *jstr(const char *s, uint64_t len)
{
    char *c = utf8_clean(s, len);
    json_t *j = c ? json_stringn(c, (size_t)len) : NULL;
    free(c);
    return j ? j : json_null();
}

/* o[key] = v, with the key made valid UTF-8 */
static void jset(json_t *o, const char *key, json_t *v)
{
    char *c = utf8_clean(key, strlen(key));
    if (c)
        json_object_set_new(o, c, v);
    else
        json_decref(v);
    free(c);
}

static json_t *jreal(double v)
{
    if (isfinite(v))
        return json_real(v);
    return json_string(isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
}

static json_t *jscalar(const kvv_gguf_kv *kv)
{
    switch (kv->type) {
    case KVV_GGUF_UINT8: case KVV_GGUF_UINT16: case KVV_GGUF_UINT32: case KVV_GGUF_UINT64:
        if (kv->v.u64 > (uint64_t)INT64_MAX) {
            char b[32];
            snprintf(b, sizeof b, "%llu", (unsigned long long)kv->v.u64);
            return json_string(b);
        }
        return json_integer((json_int_t)kv->v.u64);
    case KVV_GGUF_INT8: case KVV_GGUF_INT16: case KVV_GGUF_INT32: case KVV_GGUF_INT64:
        return json_integer((json_int_t)kv->v.i64);
    case KVV_GGUF_FLOAT32: case KVV_GGUF_FLOAT64:
        return jreal(kv->v.f64);
    case KVV_GGUF_BOOL:
        return json_boolean(kv->v.u64 != 0);
    case KVV_GGUF_STRING:
        return jstr(kv->v.str.ptr, kv->v.str.len);
    default:
        return json_null();
    }
}

static json_t *jarray_elem(const kvv_gguf_kv *kv, uint64_t i)
{
    if (kv->arr_type == KVV_GGUF_STRING)
        return jstr(kv->arr_str[i].ptr, kv->arr_str[i].len);
    if (kv->arr_type == KVV_GGUF_BOOL)
        return json_boolean(kvv_gguf_arr_i64(kv, i) != 0);
    if (is_int_type(kv->arr_type))
        return json_integer((json_int_t)kvv_gguf_arr_i64(kv, i));
    return jreal(kvv_gguf_arr_f64(kv, i));
}

static json_t *json_metadata(const kvv_gguf *g)
{
    json_t *o = json_object();
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const kvv_gguf_kv *kv = &g->kv[i];
        if (kv->type == KVV_GGUF_ARRAY) {
            json_t *first = json_array();
            uint64_t n = kv->arr_n < ARRAY_SHOW_JSON ? kv->arr_n : ARRAY_SHOW_JSON;
            for (uint64_t j = 0; j < n; j++)
                json_array_append_new(first, jarray_elem(kv, j));
            jset(o, kv->key,
                                json_pack("{s:s, s:s, s:I, s:o}", "type", "array", "elem_type",
                                          kvv_gguf_type_name(kv->arr_type), "count",
                                          (json_int_t)kv->arr_n, "first", first));
        } else {
            jset(o, kv->key, jscalar(kv));
        }
    }
    return o;
}

static json_t *json_tensors(const kvv_gguf *g, json_t **by_type, uint64_t *total)
{
    json_t *a = json_array();
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const kvv_gguf_tensor *t = &g->tensors[i];
        json_t *shape = json_array();
        for (uint32_t d = 0; d < t->n_dims; d++)
            json_array_append_new(shape, json_integer((json_int_t)t->ne[d]));
        json_array_append_new(a, json_pack("{s:o, s:s, s:o, s:I, s:I}", "name",
                                           jstr(t->name, strlen(t->name)), "type",
                                           kvv_type_name(t->type), "shape", shape, "bytes",
                                           (json_int_t)t->nbytes, "offset", (json_int_t)t->offset));
    }
    type_totals tt;
    count_types(g, &tt);
    *by_type = json_object();
    for (int ty = 0; ty < KVV_TYPE_COUNT; ty++)
        if (tt.count[ty])
            json_object_set_new(*by_type, kvv_type_name((uint32_t)ty),
                                json_pack("{s:I, s:I}", "count", (json_int_t)tt.count[ty], "bytes",
                                          (json_int_t)tt.bytes[ty]));
    *total = tt.total;
    return a;
}

static json_t *json_hparams(const kvv_hparams *hp, const float *freqs)
{
    json_t *local = json_array();
    for (int il = 0; il < hp->n_layer && il < KVV_MAX_LAYERS; il++)
        if (hp->swa_layer[il])
            json_array_append_new(local, json_integer(il));
    json_t *f = json_null();
    if (freqs) {
        f = json_array();
        for (int i = 0; i < hp->n_rot / 2; i++)
            json_array_append_new(f, jreal(freqs[i]));
    }
    json_t *o = json_pack("{s:s, s:b, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i}", "name",
                          hp->arch_name, "supported", 1, "n_layer", hp->n_layer, "n_embd",
                          hp->n_embd, "n_head", hp->n_head, "n_head_kv", hp->n_head_kv, "head_dim",
                          hp->head_dim, "head_dim_v", hp->head_dim_v, "n_ff", hp->n_ff, "n_vocab",
                          hp->n_vocab, "n_ctx_train", hp->n_ctx_train);
    json_object_set_new(o, "rope_type", json_string(hp->rope_type == KVV_ROPE_NORM ? "norm" : "neox"));
    json_object_set_new(o, "n_rot", json_integer(hp->n_rot));
    json_object_set_new(o, "rope_base", jreal(hp->rope_base));
    json_object_set_new(o, "rope_base_swa", jreal(hp->rope_base_swa));
    json_object_set_new(o, "rope_freqs", f);
    json_object_set_new(o, "norm_eps", jreal(hp->norm_eps));
    json_object_set_new(o, "attn_softcap", jreal(hp->attn_softcap));
    json_object_set_new(o, "final_softcap", jreal(hp->final_softcap));
    json_object_set_new(o, "query_scale", jreal(hp->query_scale));
    json_object_set_new(o, "embd_scale", jreal(hp->embd_scale));
    json_object_set_new(o, "n_swa", json_integer(hp->n_swa));
    json_object_set_new(o, "swa_period", json_integer(hp->swa_period));
    json_object_set_new(o, "swa_layers", local);
    json_object_set_new(o, "activation", json_string(hp->act == KVV_ACT_SILU ? "silu" : "gelu_tanh"));
    json_object_set_new(o, "tied_output", json_boolean(hp->tied_output));
    json_object_set_new(o, "qkv_bias", json_boolean(hp->has_qkv_bias));
    json_object_set_new(o, "qk_norm", json_boolean(hp->has_qk_norm));
    json_object_set_new(o, "post_norms", json_boolean(hp->has_post_norms));
    json_object_set_new(o, "fused_qkv", json_boolean(hp->fused_qkv));
    json_object_set_new(o, "fused_gate_up", json_boolean(hp->fused_gate_up));
    return o;
}

static json_t *json_memory(const kvv_hparams *hp)
{
    kvv_token_memory m;
    kvv_token_memory_of(hp, &m);
    json_t *o = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "kv_f32", (json_int_t)m.kv_f32,
                          "kv_f16", (json_int_t)m.kv_f16, "kv_bf16", (json_int_t)m.kv_bf16,
                          "resid_f32", (json_int_t)m.resid_f32, "resid_bf16",
                          (json_int_t)m.resid_bf16, "resid_layers_f32",
                          (json_int_t)m.resid_layers_f32, "resid_layers_bf16",
                          (json_int_t)m.resid_layers_bf16);
    json_object_set_new(o, "kv_over_resid", json_real((double)m.kv_bf16 / (double)m.resid_bf16));
    json_object_set_new(o, "kv_over_resid_layers",
                        json_real((double)m.kv_bf16 / (double)m.resid_layers_bf16));
    return o;
}

/* root (consumed) to --json's FILE or stdout. @return 0 or the exit code. */
static int emit_json(json_t *root, const char *path)
{
    int rc = kvv_output_write_json(path, root, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    json_decref(root);
    return rc;
}

/* ------------------------------------------------------------ commands */

static int info_cpu(const kvv_output_cli *out)
{
    kvv_cpu_isa_info ci;
    kvv_error err = {0};
    if (kvv_cpu_isa_probe(&ci, &err))
        return kvv_cli_fail(&err);
    if (out->json_path) {
        json_t *tables = json_array();
        for (int i = 0; i < KVV_CPU_ISA_COUNT; i++) {
            int lanes, fused;
            bool built = kvv_cpu_isa_order((kvv_cpu_isa)i, &lanes, &fused);
            json_array_append_new(
                tables, json_pack("{s:s, s:b, s:b, s:b, s:i, s:b, s:s, s:b}", "name",
                                  kvv_cpu_isa_name((kvv_cpu_isa)i), "available", ci.can_run[i],
                                  "native", ci.native[i], "built", built, "lanes", lanes,
                                  "fused", fused, "needs", kvv_cpu_isa_needs((kvv_cpu_isa)i),
                                  "chosen", i == (int)ci.best));
        }
        json_t *root = json_pack("{s:s, s:o, s:s, s:s}", "cpu_features", ci.features, "tables",
                                 tables, "default", kvv_cpu_isa_name(ci.best), "chosen",
                                 kvv_cpu_isa_name(ci.best));
        json_object_set_new(root, "max_isa", ci.max_isa[0] ? json_string(ci.max_isa) : json_null());
        int rc = emit_json(root, out->json_path);
        if (rc || out->stdout_taken)
            return rc;
    }
    printf("cpu engine kernel tables (--engine cpu --isa NAME):\n");
    printf("  cpu features: %s\n", ci.features[0] ? ci.features : "(none detected)");
    printf("  %-8s %-9s  %-7s %-30s %s\n", "table", "runs here", "native", "reduction order",
           "needs");
    for (int i = 0; i < KVV_CPU_ISA_COUNT; i++) {
        int lanes, fused;
        bool built = kvv_cpu_isa_order((kvv_cpu_isa)i, &lanes, &fused);
        char order[48] = "not in this build";
        if (built)
            snprintf(order, sizeof order, "%d lanes, %s", lanes,
                     fused ? "fused multiply-add" : "multiply then add");
        printf("  %-8s %-9s  %-7s %-30s %s\n", kvv_cpu_isa_name((kvv_cpu_isa)i),
               ci.can_run[i] ? "yes" : "no", ci.native[i] ? "yes" : "no", order,
               kvv_cpu_isa_needs((kvv_cpu_isa)i));
    }
    printf("  default: %s (what the engine chooses: the widest this CPU runs; --isa picks "
           "another)\n",
           kvv_cpu_isa_name(ci.best));
    if (ci.max_isa[0])
        printf("  KVV_CPU_MAX_ISA=%s hides the wider tables\n", ci.max_isa);
    return 0;
}

static int info_shape(const char *name, long vocab, const kvv_output_cli *out)
{
    const kvv_shape *s = kvv_shape_find(name);
    if (!s) {
        char names[1024];
        kvv_shape_list(names, sizeof names);
        fprintf(stderr, "kvverify info: option --shape: unknown shape '%s' (valid: %s)\n", name, names);
        return KVV_EXIT_BAD_INPUT;
    }
    kvv_hparams hp;
    kvv_shape_hparams(s, (int)vocab, &hp);
    if (out->json_path) {
        json_t *root = json_pack("{s:s, s:s, s:i}", "shape", s->name, "about", s->about,
                                 "real_vocab", s->real_vocab);
        json_object_set_new(root, "architecture", json_hparams(&hp, NULL));
        json_object_set_new(root, "token_memory", json_memory(&hp));
        int rc = emit_json(root, out->json_path);
        if (rc || out->stdout_taken)
            return rc;
    }
    printf("shape %s: %s\n\narchitecture: %s\n", s->name, s->about, hp.arch_name);
    print_hparams(&hp, s->rope_factor > 0);
    print_memory(&hp);
    return 0;
}

static int info_file(const char *path, const kvv_output_cli *out)
{
    kvv_gguf *g = NULL;
    kvv_error err = {0};
    if (kvv_gguf_open(path, &g, &err))
        return kvv_cli_fail(&err);
    /* architecture: hyperparameters, then the binding when there are tensors */
    kvv_hparams hp;
    kvv_error aerr = {0};
    kvv_status ast = kvv_hparams_read(g, &hp, &aerr);
    kvv_model *m = NULL;
    kvv_error berr = {0};
    kvv_status bst = KVV_OK;
    if (ast == KVV_OK && g->n_tensors > 0) {
        bst = kvv_model_from_gguf(g, &m, &berr); /* on success m owns g */
        if (bst == KVV_OK)
            hp = m->hp;
    }
    const bool vocab_only = g->n_tensors == 0;
    int rc = 0;
    if (out->json_path) {
        json_t *by_type;
        uint64_t total;
        json_t *root = json_pack("{s:o, s:i, s:I, s:i, s:I, s:I, s:I}", "file", jstr(path, strlen(path)), "version",
                                 (int)g->version, "size", (json_int_t)g->size, "alignment",
                                 (int)g->alignment, "data_offset", (json_int_t)g->data_offset,
                                 "n_kv", (json_int_t)g->n_kv, "n_tensors", (json_int_t)g->n_tensors);
        json_object_set_new(root, "metadata", json_metadata(g));
        json_object_set_new(root, "tensors", json_tensors(g, &by_type, &total));
        json_object_set_new(root, "type_counts", by_type);
        json_object_set_new(root, "tensor_bytes", json_integer((json_int_t)total));
        if (ast == KVV_OK) {
            json_t *a = json_hparams(&hp, m ? m->hp.rope_freqs : NULL);
            if (bst != KVV_OK) {
                json_object_set_new(a, "supported", json_boolean(bst != KVV_ERR_UNSUPPORTED));
                json_object_set_new(a, "error", jstr(berr.msg, strlen(berr.msg)));
            }
            json_object_set_new(root, "architecture", a);
            json_object_set_new(root, "token_memory", json_memory(&hp));
        } else {
            json_object_set_new(root, "architecture",
                                json_pack("{s:b, s:o}", "supported", ast != KVV_ERR_UNSUPPORTED,
                                          "error", jstr(aerr.msg, strlen(aerr.msg))));
        }
        json_object_set_new(root, "vocab_only", json_boolean(vocab_only));
        rc = emit_json(root, out->json_path);
    }
    if (!out->stdout_taken) {
        printf("file: %s\n  GGUF v%u, %llu bytes, alignment %u, tensor data at byte %llu\n", path,
               g->version, (unsigned long long)g->size, g->alignment,
               (unsigned long long)g->data_offset);
        print_metadata(g);
        print_tensors(g);
        if (ast == KVV_ERR_UNSUPPORTED) {
            printf("\narchitecture: not supported: %s\n", aerr.msg);
        } else if (ast != KVV_OK) {
            printf("\narchitecture: cannot be described: %s\n", aerr.msg);
        } else {
            printf("\narchitecture: %s%s\n", hp.arch_name,
                   vocab_only ? " (vocabulary-only file: no weights)"
                   : bst == KVV_ERR_UNSUPPORTED ? " (tensors not supported, see below)"
                   : bst != KVV_OK ? " (tensors do not match, see below)" : "");
            print_hparams(&hp, m && m->hp.rope_freqs);
            print_memory(&hp);
        }
        if (bst != KVV_OK)
            printf("\nbinding: %s\n", berr.msg);
    }
    if (bst == KVV_ERR_FORMAT) {
        fprintf(stderr, "kvverify: %s\n", berr.msg);
        rc = KVV_EXIT_BAD_INPUT;
    }
    if (m)
        kvv_model_close(m);
    else
        kvv_gguf_close(g);
    return rc;
}

/* info's own options. */
typedef struct {
    const char *file, *shape;
    long vocab;
    bool cpu;
} info_args;

static bool own_option(void *state, kvv_opts *o)
{
    info_args *a = state;
    if (kvv_opts_flag(o, "--cpu")) {
        a->cpu = true;
    } else if (kvv_opts_value(o, "--shape")) {
        a->shape = o->value;
    } else if (kvv_opts_value(o, "--vocab")) {
        if (o->value)
            kvv_opts_int(o, "--vocab", o->value, 1, 1 << 24, &a->vocab);
    } else if (kvv_opts_positional(o) && !a->file) {
        a->file = o->arg;
    } else {
        return false;
    }
    return true;
}

int kvv_cmd_info(int argc, char **argv)
{
    kvv_opts o;
    kvv_opts_init(&o, "info", argc, argv);
    kvv_output_cli out;
    kvv_output_cli_init(&out, "info", KVV_OUT_JSON);
    info_args a = {0};
    const kvv_opt_group g[] = {kvv_output_cli_group(&out), {own_option, NULL, &a}};
    int code = kvv_opts_parse(&o, info_usage, g, 2);
    if (code != KVV_OPTS_RUN)
        return code;
    const char *file = a.file, *shape = a.shape;
    const bool cpu = a.cpu;
    const long vocab = a.vocab;
    if ((file != NULL) + (shape != NULL) + cpu > 1) {
        kvv_opts_error(&o, "give one of a MODEL file, --shape or --cpu");
        return KVV_EXIT_BAD_INPUT;
    }
    if (cpu && vocab) {
        kvv_opts_error(&o, "--vocab only applies to --shape");
        return KVV_EXIT_BAD_INPUT;
    }
    if (cpu)
        return info_cpu(&out);
    if (shape)
        return info_shape(shape, vocab, &out);
    if (!file) {
        kvv_opts_error(&o, "missing MODEL file (or --shape NAME)");
        return KVV_EXIT_BAD_INPUT;
    }
    if (vocab) {
        kvv_opts_error(&o, "--vocab only applies to --shape");
        return KVV_EXIT_BAD_INPUT;
    }
    return info_file(file, &out);
}
