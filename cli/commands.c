/* commands.c — the table of subcommands main.c dispatches to (see
 * commands.h); also walked by the option-parser fuzz target. */
#include <string.h>

#include "cli/commands.h"

/* The table `kvverify --help` prints, in this order. */
static const kvv_command commands[] = {
    {"audit", kvv_cmd_audit, "one-shot audit: kv, patch, greedy, invariance, kvdirect, compare, batch, tables (also: kvverify MODEL)"},
    {"info", kvv_cmd_info, "metadata, tensors, architecture and per-token memory of a model"},
    {"kv", kvv_cmd_kv, "cached K/V bit-equal to K/V recomputed from the residual stream"},
    {"patch", kvv_cmd_patch, "residual patching at every layer gives KL exactly 0"},
    {"greedy", kvv_cmd_greedy, "greedy decoding with and without a KV cache, bit for bit"},
    {"invariance", kvv_cmd_invariance, "chunking, prefill vs decode, threads: same bits"},
    {"batch", kvv_cmd_batch, "a request alone vs among others sharing the calls: same bits"},
    {"compare", kvv_cmd_compare, "engine A vs engine B per layer and on logits: ULP, NMSE, KL, top-1"},
    {"numerics", kvv_cmd_numerics, "each engine's ops vs the correctly rounded result (MPFR), in ULPs"},
    {"bench", kvv_cmd_bench, "prompt and decode tokens/s of an engine, with FLOPs and bytes per token"},
    {"evict", kvv_cmd_evict, "cache policies and KV-Direct against the full cache, by budget and bytes"},
    {"memory", kvv_cmd_memory, "bytes held over a multi-turn conversation: full cache vs KV-Direct"},
    {"latency", kvv_cmd_latency, "read cached K/V vs recompute them from residuals, per batch size"},
    {"serve", kvv_cmd_serve, "certify a running server over HTTP: repeat, concurrent, prefix cache, reference"},
    {"run", kvv_cmd_run, "greedy decoding or a teacher-forced pass: token ids, text, logits"},
    {"synth", kvv_cmd_synth, "write a random-weight GGUF model of a supported architecture"},
    {"tokenize", kvv_cmd_tokenize, "text to token ids (and --decode ids to text), as llama.cpp"},
    {"vectors", kvv_cmd_vectors, "golden vectors: gen, check (bit for bit) and show .kvv files"},
    {"suite", kvv_cmd_suite, "run a nightly manifest of cases, or one --shard I/N of it"},
    {"report", kvv_cmd_report, "render saved JSON reports as one HTML page; several nights: a trend"},
    {"engines", kvv_cmd_engines, "the engines: built-in and plugins found, modes, kernel tables, capabilities"},
    {"checks", kvv_cmd_checks, "every check: what it proves, its negative control, how to run it"},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

const kvv_command *kvv_commands(int *n)
{
    *n = (int)N_COMMANDS;
    return commands;
}

const kvv_command *kvv_command_find(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}
