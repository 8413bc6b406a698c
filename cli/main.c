/*
 * main.c — the kvverify command: dispatch to subcommands.
 *
 *   kvverify COMMAND [options]      see kvverify --help
 *   kvverify MODEL.gguf [options]   the one-shot audit (kvverify audit MODEL)
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/opts.h"

/* The table `kvverify --help` prints, in this order. */
static const kvv_command commands[] = {
    {"audit", kvv_cmd_audit, "one-shot audit: kv, patch, greedy, invariance, kvdirect, compare (also: kvverify MODEL)"},
    {"info", kvv_cmd_info, "metadata, tensors, architecture and per-token memory of a model"},
    {"kv", kvv_cmd_kv, "cached K/V bit-equal to K/V recomputed from the residual stream"},
    {"patch", kvv_cmd_patch, "residual patching at every layer gives KL exactly 0"},
    {"greedy", kvv_cmd_greedy, "greedy decoding with and without a KV cache, bit for bit"},
    {"invariance", kvv_cmd_invariance, "chunking, prefill vs decode, threads: same bits"},
    {"compare", kvv_cmd_compare, "engine A vs engine B per layer and on logits: ULP, NMSE, KL, top-1"},
    {"numerics", kvv_cmd_numerics, "each engine's ops vs the correctly rounded result (MPFR), in ULPs"},
    {"bench", kvv_cmd_bench, "prompt and decode tokens/s of an engine, with FLOPs and bytes per token"},
    {"evict", kvv_cmd_evict, "cache policies and KV-Direct against the full cache, by budget and bytes"},
    {"memory", kvv_cmd_memory, "bytes held over a multi-turn conversation: full cache vs KV-Direct"},
    {"latency", kvv_cmd_latency, "read cached K/V vs recompute them from residuals, per batch size"},
    {"run", kvv_cmd_run, "greedy decoding or a teacher-forced pass: token ids, text, logits"},
    {"synth", kvv_cmd_synth, "write a random-weight GGUF model of a supported architecture"},
    {"tokenize", kvv_cmd_tokenize, "text to token ids (and --decode ids to text), as llama.cpp"},
    {"vectors", kvv_cmd_vectors, "golden vectors: gen, check (bit for bit) and show .kvv files"},
    {"suite", kvv_cmd_suite, "run a nightly manifest of cases, or one --shard I/N of it"},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static const kvv_command *find_command(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

static void usage(FILE *f)
{
    fprintf(f,
            "kvverify %s — certify that a transformer inference engine computes what it\n"
            "claims, bit for bit: KV recompute from residuals, patching, cache-free greedy\n"
            "decoding, batch invariance, KV-Direct against eviction baselines.\n\n"
            "usage: kvverify COMMAND [options]     (kvverify COMMAND --help for details)\n"
            "       kvverify MODEL.gguf [options]  one-shot audit of a model\n\n"
            "commands:\n",
            KVV_VERSION);
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
    fprintf(f,
            "\nexit codes: 0 every check that could run passed (the others are listed as\n"
            "unsupported by this engine), 1 a check failed, 2 bad input or usage, 77\n"
            "nothing could be checked (e.g. unsupported architecture).\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return KVV_EXIT_BAD_INPUT;
    }
    const char *a = argv[1];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0 || strcmp(a, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(a, "--version") == 0 || strcmp(a, "version") == 0) {
        printf("kvverify %s\n", KVV_VERSION);
        return 0;
    }
    const kvv_command *c = find_command(a);
    if (c)
        return c->run(argc - 1, argv + 1);
    /* `kvverify MODEL` is the audit. */
    const kvv_command *audit = find_command("audit");
    if (audit && a[0] != '-') {
        argv[0] = (char *)"audit";
        return audit->run(argc, argv);
    }
    fprintf(stderr, "kvverify: unknown command '%s' (see kvverify --help)\n", a);
    return KVV_EXIT_BAD_INPUT;
}
