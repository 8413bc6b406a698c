/* engine_opts.c — the engine options every command shares (see engine_opts.h). */
#include "cli/engine_opts.h"

#include <string.h>

#include "engine/cpu/cpu_isa.h"

void kvv_engine_cli_init(kvv_engine_cli *e, const char *cmd, const char *default_engine,
                         unsigned accepts)
{
    memset(e, 0, sizeof *e);
    e->cmd = cmd;
    e->accepts = accepts;
    e->default_engine = default_engine;
    e->engine = default_engine;
    e->cache_type = KVV_CACHE_F32;
    e->repack = -1;
}

/* Is o->arg the engine option `name` (bit) taking a value? One this
 * command does not take is consumed with an error. */
static bool option(kvv_engine_cli *e, kvv_opts *o, const char *name, unsigned bit)
{
    if (!kvv_opts_value(o, name))
        return false;
    if (!(e->accepts & bit))
        kvv_opts_error(o, "option %s: not used by %s", name, e->cmd);
    return true;
}

/* --engine-opt KEY=VALUE: appended in order (the plugin sees them so). */
static void engine_opt(kvv_engine_cli *e, kvv_opts *o)
{
    if (!o->value || o->failed)
        return;
    const char *eq = strchr(o->value, '=');
    if (!eq || eq == o->value)
        kvv_opts_error(o, "option --engine-opt: '%s' is not KEY=VALUE", o->value);
    else if (e->n_engine_opts >= KVV_ENGINE_CLI_MAX_EOPTS)
        kvv_opts_error(o, "option --engine-opt: more than %d given", KVV_ENGINE_CLI_MAX_EOPTS);
    else
        e->engine_opts[e->n_engine_opts++] = o->value;
}

bool kvv_engine_cli_parse(void *state, kvv_opts *o)
{
    kvv_engine_cli *e = state;
    long v;
    kvv_mode m;
    if (option(e, o, "--engine", KVV_ENGINE_OPT_ENGINE)) {
        if (o->value && !o->failed) {
            if (strcmp(o->value, "all") == 0 && !e->allow_all)
                kvv_opts_error(o, "option --engine: 'all' is for kvverify numerics");
            e->engine = o->value;
        }
    } else if (option(e, o, "--mode", KVV_ENGINE_OPT_MODE)) {
        if (o->value && !o->failed && !kvv_mode_from_name(o->value, &m))
            kvv_opts_error(o, "option --mode: '%s' is not exact, fast or invariant", o->value);
        e->mode = o->value;
    } else if (option(e, o, "--threads", KVV_ENGINE_OPT_THREADS)) {
        if (o->value && !o->failed &&
            kvv_opts_int(o, "--threads", o->value, 1, KVV_ENGINE_MAX_THREADS, &v))
            e->n_threads = (int)v;
    } else if (option(e, o, "--cache-type", KVV_ENGINE_OPT_CACHE)) {
        if (o->value && !o->failed && !kvv_cache_type_from_name(o->value, &e->cache_type))
            kvv_opts_error(o, "option --cache-type: '%s' is not f32, f16 or bf16", o->value);
        e->cache_given = true;
    } else if (option(e, o, "--device", KVV_ENGINE_OPT_DEVICE)) {
        if (o->value && !o->failed && !o->value[0])
            kvv_opts_error(o, "option --device: empty device name");
        e->device = o->value;
    } else if (option(e, o, "--ubatch", KVV_ENGINE_OPT_UBATCH)) {
        if (o->value && !o->failed && kvv_opts_int(o, "--ubatch", o->value, 1, 1 << 20, &v))
            e->n_ubatch = (int)v;
    } else if (option(e, o, "--engine-opt", KVV_ENGINE_OPT_EOPT)) {
        engine_opt(e, o);
    } else if (kvv_opts_flag(o, "--repack") || kvv_opts_flag(o, "--no-repack")) {
        if (!(e->accepts & KVV_ENGINE_OPT_REPACK))
            kvv_opts_error(o, "option %s: not used by %s", o->arg, e->cmd);
        else if (e->repack >= 0 && e->repack != (strcmp(o->arg, "--repack") == 0))
            kvv_opts_error(o, "options --repack and --no-repack: give one");
        e->repack = strcmp(o->arg, "--repack") == 0;
    } else if (option(e, o, "--isa", KVV_ENGINE_OPT_ISA)) {
        kvv_cpu_isa t;
        if (o->value && !o->failed && strcmp(o->value, "auto") != 0 &&
            !kvv_cpu_isa_from_name(o->value, &t))
            kvv_opts_error(o, "option --isa %s: no such kernel table (generic, avx2, avx512 or "
                              "auto)", o->value);
        e->isa = o->value;
    } else {
        return false;
    }
    return true;
}

bool kvv_engine_cli_check_name(kvv_opts *o, const char *option, const char *name)
{
    kvv_error err = {0};
    if (kvv_engine_exists(name, &err) == KVV_OK)
        return true;
    kvv_opts_error(o, "option %s: %s", option, err.msg);
    return false;
}

bool kvv_engine_cli_check_isa(kvv_opts *o, const char *option, const char *isa,
                              const char *engine)
{
    if (!isa || o->failed)
        return true;
    kvv_error err = {0};
    if (!engine || strcmp(engine, "all") != 0) {
        if (kvv_engine_check_opt(engine, KVV_ENGINE_OPT_ISA, isa, &err)) {
            kvv_opts_error(o, "option %s: %s", option, err.msg);
            return false;
        }
    }
    kvv_cpu_isa t;
    if (kvv_cpu_isa_choose(isa, &t, &err) == KVV_OK)
        return true;
    /* the message starts "--isa NAME: ..." */
    const char *m = strncmp(err.msg, "--isa ", 6) == 0 ? err.msg + 6 : err.msg;
    kvv_opts_error(o, "option %s %s", option, m);
    return false;
}

/* After the last option: the engine exists (one message, before anything
 * runs), and a thread count the reference engine would not use is said. */
static void finish(void *state, kvv_opts *o)
{
    kvv_engine_cli *e = state;
    if (!e->engine || (e->allow_all && strcmp(e->engine, "all") == 0)) {
        if (e->engine && !e->isa_elsewhere)
            kvv_engine_cli_check_isa(o, "--isa", e->isa, e->engine);
        return;
    }
    if (!kvv_engine_cli_check_name(o, "--engine", e->engine))
        return;
    if (!e->isa_elsewhere && !kvv_engine_cli_check_isa(o, "--isa", e->isa, e->engine))
        return;
    kvv_error err = {0};
    if (e->repack >= 0 && kvv_engine_check_opt(e->engine, KVV_ENGINE_OPT_REPACK, NULL, &err)) {
        kvv_opts_error(o, "option %s: %s", e->repack ? "--repack" : "--no-repack", err.msg);
        return;
    }
    if (!kvv_engine_takes(e->engine, KVV_ENGINE_OPT_THREADS) && e->n_threads > 1 &&
        !e->threads_elsewhere) {
        fprintf(stderr, "kvverify %s: note: the %s engine runs one thread; --threads %d "
                        "applies to the other engines\n", e->cmd,
                e->engine, e->n_threads);
        e->n_threads = 1;
    }
}

kvv_opt_group kvv_engine_cli_group(kvv_engine_cli *e)
{
    return (kvv_opt_group){kvv_engine_cli_parse, finish, e};
}

void kvv_engine_cli_help(FILE *f, const kvv_engine_cli *e, bool heading)
{
    char names[128];
    kvv_engine_list(names, sizeof names);
    if (heading)
        fprintf(f, "engine:\n");
    if (e->accepts & KVV_ENGINE_OPT_ENGINE) {
        if (e->engine_help)
            fprintf(f, "  --engine NAME       %s\n", e->engine_help);
        else
            fprintf(f, "  --engine NAME       engine: %s (default %s)\n", names,
                    e->default_engine ? e->default_engine : "ref");
    }
    if (e->accepts & KVV_ENGINE_OPT_MODE)
        fprintf(f, "  --mode MODE         %s\n",
                e->mode_help ? e->mode_help
                : "exact (ref), fast or invariant (cpu; default invariant)");
    if (e->accepts & KVV_ENGINE_OPT_THREADS)
        fprintf(f, "  --threads N         engine threads, 1..%d (default 1)\n",
                KVV_ENGINE_MAX_THREADS);
    if (e->accepts & KVV_ENGINE_OPT_CACHE)
        fprintf(f, "  --cache-type T      KV cache storage: f32 (default), f16, bf16\n");
    if (e->accepts & KVV_ENGINE_OPT_DEVICE)
        fprintf(f, "  --device D          where the engine runs (llama.cpp: cpu, vulkan, cuda;\n"
                   "                      ref and cpu: cpu only)\n");
    if (e->accepts & KVV_ENGINE_OPT_UBATCH)
        fprintf(f, "  --ubatch N          micro-batch size of engines that have one (default: "
                   "the engine's)\n");
    if (e->accepts & KVV_ENGINE_OPT_EOPT)
        fprintf(f, "  --engine-opt K=V    an engine's own option, repeatable (cpu: dequant_all=1,\n"
                   "                      f32_act=1; plugins: docs/plugins.md,\n"
                   "                      plugins/llama.cpp/README.md)\n");
    if (e->accepts & KVV_ENGINE_OPT_REPACK)
        fprintf(f, "  --repack            cpu, invariant mode: hold repacked copies of quantized\n"
                   "                      weights (faster decode; a copy beside any other mapping)\n"
                   "  --no-repack         ... or read them from the mapped file; the same bits\n"
                   "                      (default here: %s)\n",
                e->repack_default ? "--repack" : "--no-repack");
    if ((e->accepts & KVV_ENGINE_OPT_ISA) && e->isa_help)
        fprintf(f, "  --isa NAME          %s\n", e->isa_help);
    else if (e->accepts & KVV_ENGINE_OPT_ISA)
        fprintf(f, "  --isa NAME          cpu: kernel table generic, avx2, avx512 or auto (default:\n"
                   "                      the widest this CPU runs; kvverify info --cpu lists them)\n");
}

kvv_mode kvv_engine_cli_mode(const kvv_engine_cli *e, const char *name)
{
    kvv_mode m = kvv_engine_default_mode(name);
    if (e->mode)
        kvv_mode_from_name(e->mode, &m);
    return m;
}

kvv_engine_opts kvv_engine_cli_opts(const kvv_engine_cli *e)
{
    kvv_engine_opts eo = kvv_engine_opts_default();
    eo.name = e->engine ? e->engine : "ref";
    eo.mode = kvv_engine_cli_mode(e, eo.name);
    eo.n_threads = e->n_threads > 0 ? e->n_threads : 1;
    eo.cache_type = e->cache_type;
    eo.device = e->device;
    eo.n_ubatch = e->n_ubatch;
    eo.engine_opts = e->n_engine_opts ? e->engine_opts : NULL;
    eo.n_engine_opts = e->n_engine_opts;
    eo.isa = e->isa;
    eo.repack = e->repack >= 0 ? e->repack
                : e->repack_default && kvv_engine_takes(eo.name, KVV_ENGINE_OPT_REPACK);
    return eo;
}
