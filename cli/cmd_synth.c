/*
 * cmd_synth.c — `kvverify synth`: write a random-weight GGUF model.
 *
 *   kvverify synth --arch ARCH [--shape NAME] [--type T] [--seed N] [--vocab N] -o FILE
 *   kvverify synth --list-shapes
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "cli/output_opts.h"
#include "model/shapes.h"
#include "model/synth.h"

static void synth_usage(FILE *f)
{
    char list[1024];
    kvv_shape_list(list, sizeof list);
    fprintf(f,
            "usage: kvverify synth --arch ARCH [--shape NAME] [--type TYPE] [--seed N]\n"
            "                      [--vocab N] -o FILE\n"
            "       kvverify synth --list-shapes\n\n"
            "Write a GGUF v3 model with random weights and a synthetic SentencePiece\n"
            "vocabulary, with the tensor names and metadata keys llama.cpp's converter\n"
            "writes, so llama.cpp loads it. The same options give a byte-identical file.\n\n"
            "options:\n"
            "  --arch ARCH     llama, qwen2, qwen3, gemma2, gemma3 or phi3 (implied by --shape)\n"
            "  --shape NAME    layer shape (default: ARCH-tiny); one of:\n"
            "                  %s\n"
            "  --type TYPE     f32 (default), f16, bf16, q8_0, q4_0, q5_0, q4_1, q5_1, q2_k,\n"
            "                  q3_k, q4_k, q5_k or q6_k: the type of the embedding, output and\n"
            "                  projection weights; or q4_k_m, q5_k_m: llama-quantize's mixes\n"
            "                  (Q6_K output and some layers' attn_v/ffn_down). Norms and biases\n"
            "                  stay F32; rows the type's block does not divide take\n"
            "                  llama-quantize's fallback (F16; Q4_K->Q5_0, Q5_K->Q5_1,\n"
            "                  Q6_K->Q8_0, Q2_K/Q3_K->IQ4_NL)\n"
            "  --seed N        random seed (default 1)\n"
            "  --vocab N       vocabulary size (%d..%d). Default: 512 for tiny shapes; real\n"
            "                  shapes keep at most %d tokens (their real vocabularies of up to\n"
            "                  262144 would make the embedding alone gigabytes), except\n"
            "                  smollm2-135m, which keeps its real 49152\n"
            "  -o, --output FILE  where to write (atomically: an existing file is replaced only\n"
            "                  when the write succeeds)\n"
            "  --list-shapes   print every shape with its geometry and exit\n"
            "  -q, --quiet     no closing line, no progress\n"
            "  --progress      progress on stderr also when it is not a terminal\n"
            "  -h, --help      this help\n\n"
            "exit codes: 0 written, 2 bad option or write error\n",
            list, KVV_SYNTH_MIN_VOCAB, KVV_SYNTH_MAX_VOCAB, KVV_SHAPE_VOCAB_CAP);
}

static void list_shapes(void)
{
    printf("%-14s %-7s %6s %6s %9s %7s %7s %9s  %s\n", "shape", "arch", "layers", "n_embd",
           "heads/kv", "head_dim", "n_ff", "vocab", "about");
    for (int i = 0; i < kvv_shape_count(); i++) {
        const kvv_shape *s = kvv_shape_at(i);
        char heads[32];
        snprintf(heads, sizeof heads, "%d/%d", s->n_head, s->n_head_kv);
        printf("%-14s %-7s %6d %6d %9s %7d %7d %9d  %s\n", s->name, kvv_arch_name(s->arch),
               s->n_layer, s->n_embd, heads, s->head_dim, s->n_ff, s->n_vocab, s->about);
    }
}

static void on_progress(void *out, int done, int total)
{
    kvv_output_progress(out, "synth", done, total);
}

/* synth's options. */
typedef struct {
    const char *arch, *shape, *type, *out;
    uint64_t seed;
    long vocab;
    bool list;
} synth_args;

static bool own_option(void *state, kvv_opts *o)
{
    synth_args *a = state;
    if (kvv_opts_flag(o, "--list-shapes")) {
        a->list = true;
    } else if (kvv_opts_value(o, "--arch")) {
        a->arch = o->value;
    } else if (kvv_opts_value(o, "--shape")) {
        a->shape = o->value;
    } else if (kvv_opts_value(o, "--type")) {
        a->type = o->value;
    } else if (kvv_opts_value(o, "--seed")) {
        if (o->value)
            kvv_opts_u64(o, "--seed", o->value, &a->seed);
    } else if (kvv_opts_value(o, "--vocab")) {
        if (o->value)
            kvv_opts_int(o, "--vocab", o->value, KVV_SYNTH_MIN_VOCAB, KVV_SYNTH_MAX_VOCAB,
                         &a->vocab);
    } else if (kvv_opts_value(o, "--output") || kvv_opts_value(o, "-o")) {
        a->out = o->value;
        if (a->out) /* before 30 s of generating, not after */
            kvv_output_path_check(o, "-o", a->out, true);
    } else {
        return false;
    }
    return true;
}

int kvv_cmd_synth(int argc, char **argv)
{
    kvv_opts o;
    kvv_opts_init(&o, "synth", argc, argv);
    synth_args a = {.type = "f32", .seed = 1};
    kvv_output_cli output;
    kvv_output_cli_init(&output, "synth", KVV_OUT_QUIET | KVV_OUT_PROGRESS);
    const kvv_opt_group g[] = {{own_option, NULL, &a}, kvv_output_cli_group(&output)};
    int code = kvv_opts_parse(&o, synth_usage, g, 2);
    if (code != KVV_OPTS_RUN)
        return code;
    const char *arch = a.arch, *shape = a.shape, *type = a.type, *out = a.out;
    const uint64_t seed = a.seed;
    const long vocab = a.vocab;
    const bool list = a.list;
    if (list) {
        list_shapes();
        return 0;
    }

    const kvv_shape *s = NULL;
    kvv_arch_id id = KVV_ARCH_LLAMA;
    if (arch && !kvv_arch_from_name(arch, &id)) {
        kvv_opts_error(&o, "option --arch: unknown architecture '%s' (valid: llama, qwen2, qwen3, "
                           "gemma2, gemma3, phi3)", arch);
        return KVV_EXIT_BAD_INPUT;
    }
    if (shape) {
        s = kvv_shape_find(shape);
        if (!s) {
            char names[1024];
            kvv_shape_list(names, sizeof names);
            kvv_opts_error(&o, "option --shape: unknown shape '%s' (valid: %s)", shape, names);
            return KVV_EXIT_BAD_INPUT;
        }
        if (arch && s->arch != id) {
            kvv_opts_error(&o, "option --shape: shape '%s' is a %s model, not %s", shape,
                           kvv_arch_name(s->arch), arch);
            return KVV_EXIT_BAD_INPUT;
        }
    } else if (arch) {
        s = kvv_shape_default(id);
    } else {
        kvv_opts_error(&o, "give --arch ARCH or --shape NAME");
        return KVV_EXIT_BAD_INPUT;
    }
    kvv_type t;
    kvv_synth_mix mix;
    if (!kvv_synth_type_parse(type, &t, &mix)) {
        kvv_opts_error(&o, "option --type: '%s' is not one of " KVV_SYNTH_TYPE_NAMES, type);
        return KVV_EXIT_BAD_INPUT;
    }
    if (!out) {
        kvv_opts_error(&o, "missing -o FILE");
        return KVV_EXIT_BAD_INPUT;
    }

    kvv_synth_opts so = {.shape = s, .type = t, .mix = mix, .seed = seed, .n_vocab = (int)vocab,
                         .progress = on_progress, .progress_ctx = &output};
    uint64_t bytes = kvv_synth_size(&so);
    if (bytes > (64u << 20) && !output.quiet)
        fprintf(stderr, "kvverify synth: %s %s: %.0f MiB of weights to generate\n", s->name,
                kvv_synth_type_label(t, mix), (double)bytes / 1048576.0);
    kvv_error err = {0};
    if (kvv_synth_write(&so, out, &err))
        return kvv_cli_fail(&err);
    if (!output.quiet)
        printf("wrote %s: %s shape %s, %s, seed %llu, vocabulary %d, %.1f MiB of weights\n",
               out, kvv_arch_name(s->arch), s->name, kvv_synth_type_label(t, mix), (unsigned long long)seed,
               vocab ? (int)vocab : s->n_vocab, (double)bytes / 1048576.0);
    return 0;
}
