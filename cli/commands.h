/*
 * commands.h — every kvverify subcommand, as main.c's table dispatches it.
 *
 * Each is int kvv_cmd_NAME(int argc, char **argv): argv[0] is the
 * subcommand's name (main passes its own argv shifted by one; for
 * `kvverify MODEL` it passes "audit" in argv[0]), argv[1..argc) its
 * arguments, parsed with cli/opts.h's one option loop. `--help` prints the
 * subcommand's help on stdout and returns 0. Output goes to stdout,
 * messages to stderr; nothing is kept between calls.
 *
 * Every one returns a process exit code (DESIGN.md §6): 0 done / every
 * check passed, 1 a check ran and failed (commands that check), 2 bad input
 * or usage (the message names the file, field and offset, or the option),
 * 77 nothing could be checked (unsupported architecture or type). Only
 * main() exits.
 */
#ifndef KVV_COMMANDS_H
#define KVV_COMMANDS_H

/* One row of main.c's table: the name typed, the function, the help line. */
typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary; /* one line for `kvverify --help` */
} kvv_command;

/* Every subcommand, in the order `kvverify --help` lists them (a static
 * table; *n its length). */
const kvv_command *kvv_commands(int *n);
/* The subcommand called name, or NULL. */
const kvv_command *kvv_command_find(const char *name);

/* `info MODEL | --shape NAME`: metadata, tensors, architecture, per-token
 * memory (--json: one object on stdout). @return 0, or 2 for a file that
 * cannot be read or does not match its architecture. */
int kvv_cmd_info(int argc, char **argv);

/* `audit MODEL` (and `kvverify MODEL`): validate the file, run the audit's
 * checks (verify/audit.h) sized to the model, print one table; --json,
 * --junit write the report. @return 0 all passed, 1 one failed, 2, 77. */
int kvv_cmd_audit(int argc, char **argv);

/* `kv MODEL`: cached K/V against K/V recomputed from residuals
 * (verify/kv.h). @return 0 pass, 1 fail, 2, 77. */
int kvv_cmd_kv(int argc, char **argv);

/* `patch MODEL`: residual patching at every layer gives KL exactly 0
 * (verify/patch.h). @return 0 pass, 1 fail, 2, 77. */
int kvv_cmd_patch(int argc, char **argv);

/* `greedy MODEL`: cached against cache-free greedy decoding, bit for bit
 * (verify/greedy.h). @return 0 pass, 1 fail, 2, 77. */
int kvv_cmd_greedy(int argc, char **argv);

/* `invariance MODEL`: chunkings, prefill vs decode and thread counts give
 * the same bits (verify/invariance.h). @return 0 pass, 1 fail, 2, 77. */
int kvv_cmd_invariance(int argc, char **argv);
int kvv_cmd_batch(int argc, char **argv);

/* `compare MODEL --engine A --against B`: engine A against engine B per
 * layer and on the logits (verify/compare.h). @return 0 within --tol,
 * 1 not, 2, 77. */
int kvv_cmd_compare(int argc, char **argv);

/* `numerics MODEL`: each engine's ops against MPFR's correctly rounded
 * result on a forward pass's real inputs, in ULPs
 * (verify/numerics/numerics.h). @return 0 measured, 1 the rebuilt inputs
 * differ (--force-fail plants that) or the control was not measured as
 * 1 ULP, 2, 77. */
int kvv_cmd_numerics(int argc, char **argv);

/* `bench MODEL`: prompt and decode tokens/s of an engine (median of
 * repeats) with FLOPs and weight bytes per token. @return 0, 2, 77. */
int kvv_cmd_bench(int argc, char **argv);

/* `evict MODEL`: cache policies and KV-Direct against the full cache, by
 * budget and at equal bytes (verify/evict.h). @return 0 every KV-Direct run
 * bit-equal to the full cache (or none asked for), 1 not, 2, 77. */
int kvv_cmd_evict(int argc, char **argv);

/* `memory MODEL | --shape NAME`: bytes held over a multi-turn conversation,
 * full cache against KV-Direct, or the arithmetic of a named shape
 * (verify/memory.h). @return 0, 1 KV-Direct's tokens differ, 2, 77. */
int kvv_cmd_memory(int argc, char **argv);

/* `latency MODEL`: reading cached K/V against recomputing them from
 * residuals, per layer and batch size (verify/latency.h); a table, no
 * verdict. @return 0 measured, 2, 77. */
int kvv_cmd_latency(int argc, char **argv);

/* `serve URL --model F.gguf`: a running server's completions over HTTP,
 * repeated, concurrent, prompt-cached and against the reference engine
 * (verify/serve/serve.h). @return 0 all passed, 1 one failed, 2 bad usage
 * or a request the server failed, 77. */
int kvv_cmd_serve(int argc, char **argv);

/* `run MODEL (-p TEXT | --tokens IDS)`: greedy decoding or a
 * teacher-forced pass of any engine: ids, text, logits, --hash.
 * @return 0 done, 2, 77. */
int kvv_cmd_run(int argc, char **argv);

/* `synth --arch A | --shape S -o FILE`: write a random-weight GGUF model
 * (model/synth.h); --list-shapes lists the shapes. @return 0, 2. */
int kvv_cmd_synth(int argc, char **argv);

/* `tokenize MODEL TEXT` (or --decode IDS): the model's tokenizer, as
 * llama.cpp tokenizes. @return 0, 2, 77 (a vocabulary kvverify cannot
 * tokenize). */
int kvv_cmd_tokenize(int argc, char **argv);

/* `vectors gen|check|show`: record a golden vector, check an engine
 * against one bit for bit, or show one (vectors/kvv_vectors.h). @return 0
 * pass / written / shown, 1 diverged (or a --force-fail control not
 * detected), 2 bad usage or a corrupt or mismatched file, 77. */
int kvv_cmd_vectors(int argc, char **argv);

/* `suite MANIFEST [--shard I/N]`: a nightly manifest's cases, or one
 * shard of them (verify/suite/suite.h). @return 0 all passed, 1 one failed,
 * 2 bad manifest or a case that could not run, 77 nothing ran. */
int kvv_cmd_suite(int argc, char **argv);

/* `report FILE.json... [--html OUT]`: render saved JSON reports as a
 * self-contained HTML page (several of one audit or suite: a trend per
 * check). @return 0 rendered, 2 a file unreadable or not a kvverify report. */
int kvv_cmd_report(int argc, char **argv);

/* `engines [MODEL]`: the engines --engine takes (built-in, plugins found)
 * with modes, devices and kernel tables; with MODEL, each opened on it:
 * capabilities, kernel switches, kernels. @return 0, 2. */
int kvv_cmd_engines(int argc, char **argv);

/* `checks`: every check, what it proves, its control, how to run it
 * (verify/catalog.h). @return 0, 2. */
int kvv_cmd_checks(int argc, char **argv);

#endif
