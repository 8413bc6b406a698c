/*
 * engine_opts.h — the one parser of the engine options, shared by every
 * command that opens an engine (run, the checks, compare, audit, evict,
 * memory, latency, numerics, vectors gen/check, bench):
 *
 *   --engine NAME     which engine (the command's default, e.g. ref)
 *   --mode MODE       exact, fast or invariant (default: the engine's, from
 *                     kvv_engine_default_mode)
 *   --threads N       1..KVV_ENGINE_MAX_THREADS, the engines' real bound,
 *                     checked here before any engine opens
 *   --cache-type T    f32, f16 or bf16
 *   --device D        where the engine runs (plugins: llama.cpp cpu|vulkan|cuda;
 *                     the built-in engines take only cpu)
 *   --ubatch N        micro-batch size (plugins with one; 0 = the engine's)
 *   --engine-opt K=V  an engine's own option, repeatable, passed in order
 *                     (plugins; cpu: dequant_all, f32_act, seq_leak; ref none)
 *   --isa NAME        the cpu engine's kernel table: generic, avx2, avx512 or
 *                     auto (default: the widest this CPU runs; cpu_isa.h);
 *                     refused, before anything runs, with another engine or
 *                     when this CPU cannot run the table (exit 2)
 *   --repack, --no-repack
 *                     the cpu engine's invariant mode holds repacked copies
 *                     of quantized weights (faster decode, one more copy of
 *                     the weights) or reads the mapped file; the same bits
 *                     (kvv_engine_opts.repack). Default: the command's
 *                     (repack_default: on for run and bench, which hold one
 *                     engine; off for the checks and the audit, which hold
 *                     the reference's mapping too). Refused with another engine
 *
 *   kvv_engine_cli e;
 *   kvv_engine_cli_init(&e, "kv", "ref", KVV_ENGINE_OPT_ALL);
 *   kvv_opt_group g[] = {kvv_engine_cli_group(&e), ...};   // cli/opts.h
 *   ... kvv_opts_parse(&o, help, g, n) ...
 *   kvv_engine_opts eo = kvv_engine_cli_opts(&e);
 *
 * A command that takes only some of them says which (accepts); the others
 * are then "not used by CMD", not silently ignored.
 *
 * Adding an engine option (--isa, --engine-opt KEY=VALUE, --device): a
 * KVV_ENGINE_OPT_* bit and a kvv_engine_opts field (engine/engine.h), the
 * engines that take it in the registry's column (engine/engine_registry.c,
 * which refuses it for the others), then here a field below, its case in
 * kvv_engine_cli_parse, its line in kvv_engine_cli_help, and where it goes
 * in kvv_engine_cli_opts. Every command that takes KVV_ENGINE_OPT_ALL has
 * the new option, in its parsing and its --help, at once.
 */
#ifndef KVV_ENGINE_OPTS_H
#define KVV_ENGINE_OPTS_H

#include <stdbool.h>
#include <stdio.h>

#include "cli/opts.h"
#include "engine/engine.h"
#include "engine/engine_registry.h"

/* The engine options a command takes (kvv_engine_cli.accepts): the
 * KVV_ENGINE_OPT_* bits of engine/engine.h, whose registry column says
 * which engine takes each. */
enum {
    /* what only a plugin engine uses: --device --ubatch --engine-opt */
    KVV_ENGINE_OPT_PLUGIN = KVV_ENGINE_OPT_DEVICE | KVV_ENGINE_OPT_UBATCH | KVV_ENGINE_OPT_EOPT,
    /* every option this parser has (--emulate-ggml is run's own) */
    KVV_ENGINE_OPT_ALL = 0x1ffu
};

/* --engine-opt may be given this many times. */
#define KVV_ENGINE_CLI_MAX_EOPTS 32

typedef struct {
    /* what the command takes: set by kvv_engine_cli_init, then adjustable */
    const char *cmd;             /* subcommand name, for messages */
    unsigned accepts;            /* KVV_ENGINE_OPT_* */
    const char *default_engine;  /* when --engine is not given; NULL: the command decides */
    bool allow_all;              /* --engine all (numerics: every engine) */
    const char *engine_help;     /* the --engine help text; NULL: the standard one */
    const char *mode_help;       /* the --mode help text; NULL: the standard one */
    const char *isa_help;        /* the --isa help text; NULL: the standard one */
    bool threads_elsewhere;      /* --threads is another engine's (compare: --against's),
                                    so the ref engine's one-thread note does not apply */
    bool isa_elsewhere;          /* --isa is another engine's (compare: --against's): the
                                    command checks it (kvv_engine_cli_check_isa) */
    bool repack_default;         /* repack when neither --repack nor --no-repack is given */
    /* what the command line said */
    const char *engine;          /* --engine NAME, else default_engine (borrowed from argv) */
    const char *mode;            /* --mode NAME (validated), NULL = the engine's default */
    int n_threads;               /* --threads N, 0 = not given */
    kvv_cache_type cache_type;   /* --cache-type T, default f32 */
    bool cache_given;
    const char *device;          /* --device D, NULL = the engine's first */
    int n_ubatch;                /* --ubatch N, 0 = the engine's */
    /* --engine-opt KEY=VALUE in the order given (borrowed from argv);
     * kvv_engine_cli_opts points into this array, so e outlives the options */
    const char *engine_opts[KVV_ENGINE_CLI_MAX_EOPTS];
    int n_engine_opts;
    const char *isa;             /* --isa NAME (validated name), NULL = not given */
    int repack;                  /* --repack 1, --no-repack 0, -1 = not given */
} kvv_engine_cli;

/* Defaults: engine default_engine, no mode, threads and cache type not given. */
void kvv_engine_cli_init(kvv_engine_cli *e, const char *cmd, const char *default_engine,
                         unsigned accepts);

/* The group for kvv_opts_parse (state: e, which must outlive the parse).
 * Its finish refuses an engine that does not exist (kvv_engine_exists),
 * once, and --repack for an engine that does not take it, before anything
 * runs, and notes on stderr that an engine without threads (ref) runs one
 * thread when --threads asks for more (and passes 1). */
kvv_opt_group kvv_engine_cli_group(kvv_engine_cli *e);
/* The same check for an engine named by another option (compare
 * --against): "option OPTION: unknown engine ..." and o->failed.
 * @return true when it exists. */
bool kvv_engine_cli_check_name(kvv_opts *o, const char *option, const char *name);
/* The checks of --isa (option, e.g. "--isa" or compare's "--isa-a") for
 * engine `engine`: NULL isa passes; the engine must take --isa (numerics'
 * "all" includes one that does), else the registry's "engine ref does not
 * take --isa generic (it applies to the cpu engine)"; and this CPU must run
 * the table (kvv_cpu_isa_choose: its message names the table, what it needs
 * and the tables this CPU has). Errors go through kvv_opts_error (exit 2).
 * @return true when nothing was refused. */
bool kvv_engine_cli_check_isa(kvv_opts *o, const char *option, const char *isa,
                              const char *engine);
/* Consume o->arg if it is an engine option; one this command does not take
 * is an error ("not used by CMD"). @return true when consumed. */
bool kvv_engine_cli_parse(void *e, kvv_opts *o);

/* The option lines of kvv_engine_cli_help, for the options e accepts, under
 * a heading "engine:" when heading is true. */
void kvv_engine_cli_help(FILE *f, const kvv_engine_cli *e, bool heading);

/* Engine options from what was given: kvv_engine_opts_default(), then the
 * name (engine, or "ref" when there is none), the mode given or the
 * engine's default, threads (1 when not given), cache type, device,
 * micro-batch size, engine options (pointing into e: valid while e is),
 * kernel table (--isa; NULL when not given: the engine's choice) and
 * repack (given, else repack_default for an engine that takes it). */
kvv_engine_opts kvv_engine_cli_opts(const kvv_engine_cli *e);

/* The mode given for engine `name`, or that engine's default. */
kvv_mode kvv_engine_cli_mode(const kvv_engine_cli *e, const char *name);

#endif
