/* info_text.c — `kvverify info` as text on stdout (see info.h). */
#include <stdio.h>
#include <string.h>

#include "verify/info_impl.h"

#define ARRAY_SHOW 6     /* elements of a long array shown */
#define STRING_SHOW 100  /* bytes of a long string shown */

/* Length of the valid UTF-8 sequence at s[0..n), or 0 if invalid. */
int kvv_info_utf8_len(const unsigned char *s, uint64_t n)
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
            int k = kvv_info_utf8_len(u + i, n - i);
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

bool kvv_info_is_int_type(kvv_gguf_type t)
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
    else if (kvv_info_is_int_type(kv->arr_type))
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

void kvv_info_count_types(const kvv_gguf *g, kvv_info_type_totals *tt)
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
    kvv_info_type_totals tt;
    kvv_info_count_types(g, &tt);
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

void kvv_info_file_print(const kvv_info_file *f)
{
    const kvv_gguf *g = f->gguf;
    const bool vocab_only = g->n_tensors == 0;
    printf("file: %s\n  GGUF v%u, %llu bytes, alignment %u, tensor data at byte %llu\n", f->path,
           g->version, (unsigned long long)g->size, g->alignment,
           (unsigned long long)g->data_offset);
    print_metadata(g);
    print_tensors(g);
    if (f->arch_status == KVV_ERR_UNSUPPORTED) {
        printf("\narchitecture: not supported: %s\n", f->arch_err.msg);
    } else if (f->arch_status != KVV_OK) {
        printf("\narchitecture: cannot be described: %s\n", f->arch_err.msg);
    } else {
        const kvv_status bst = f->bind_status;
        printf("\narchitecture: %s%s\n", f->hp.arch_name,
               vocab_only ? " (vocabulary-only file: no weights)"
               : bst == KVV_ERR_UNSUPPORTED ? " (tensors not supported, see below)"
               : bst != KVV_OK ? " (tensors do not match, see below)" : "");
        print_hparams(&f->hp, f->model && f->model->hp.rope_freqs);
        print_memory(&f->hp);
    }
    if (f->bind_status != KVV_OK)
        printf("\nbinding: %s\n", f->bind_err.msg);
}

void kvv_info_shape_print(const kvv_shape *s, const kvv_hparams *hp)
{
    printf("shape %s: %s\n\narchitecture: %s\n", s->name, s->about, hp->arch_name);
    print_hparams(hp, s->rope_factor > 0);
    print_memory(hp);
}

void kvv_info_cpu_print(const kvv_cpu_isa_info *ci)
{
    printf("cpu engine kernel tables (--engine cpu --isa NAME):\n");
    printf("  cpu features: %s\n", ci->features[0] ? ci->features : "(none detected)");
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
               ci->can_run[i] ? "yes" : "no", ci->native[i] ? "yes" : "no", order,
               kvv_cpu_isa_needs((kvv_cpu_isa)i));
    }
    printf("  default: %s (what the engine chooses: the widest this CPU runs; --isa picks "
           "another)\n",
           kvv_cpu_isa_name(ci->best));
    if (ci->max_isa[0])
        printf("  KVV_CPU_MAX_ISA=%s hides the wider tables\n", ci->max_isa);
}
