/*
 * llama_plugin.c — llama.cpp behind kvverify's plugin ABI
 * (include/kvverify/engine_plugin.h): `--engine llama.cpp`.
 *
 * llama.cpp is used as its users get it: the prebuilt libraries of the npm
 * package node-llama-cpp (deps/llama.cpp/, scripts/fetch-llama-cpp.sh),
 * loaded at run time per device (llama_lib.h). The plugin loads the GGUF
 * with llama.cpp's own loader and opens two contexts on it: the engine, and
 * a scratch one for kv_from_residual (its cache is thrown away each call).
 *
 * Devices: cpu (the linux-x64 set; ggml picks its CPU variant for this
 * machine), vulkan (linux-x64-vulkan; every layer offloaded; Mesa's
 * lavapipe counts, see GGML_VK_VISIBLE_DEVICES below), cuda
 * (linux-x64-cuda, fetched with scripts/fetch-llama-cpp.sh --cuda). A device
 * that is not here is KVV_PLUGIN_ERR_NO_DEVICE (exit 77).
 *
 * Engine options (--engine-opt KEY=VALUE):
 *   flash_attn=auto|on|off  llama.cpp's flash attention (default auto: its own choice)
 *   extra_bufts=1|0         weight repacking into extra buffer types (default 1)
 *   n_gpu_layers=N          layers offloaded on vulkan/cuda (default: all)
 *   lib_dir=PATH            the deps/llama.cpp folder (default: $KVV_LLAMA_CPP_DIR,
 *                           else the one this plugin was built with)
 *   verbose=0|1             print llama.cpp's log on stderr
 *   kv_unified=0|1          with several sequences (params.n_seq_max > 1): one cell
 *                           pool shared by every sequence (1) or a stream per
 *                           sequence (0, llama.cpp's default)
 *   bench=0|1               run as llama-bench does (default 0; `kvverify bench` sets
 *                           1): the engine's context without a graph callback, so
 *                           ggml computes each graph whole, n_batch 2048, swa_full
 *                           off, and on the CPU a ggml thread pool attached (without
 *                           one ggml starts and joins its threads in every graph
 *                           compute). Nothing is observed: no hooks, no
 *                           kv_from_residual, no kv_write; logits and cache control
 *                           only
 *
 * Sequences (ABI 1.1, llama_seqs.c): params.n_seq_max sequences in one
 * context, each holding n_ctx positions; decode is one llama_decode of a
 * llama_batch with sequence ids. Not for a split sliding-window cache.
 *
 * Offered beyond the hooks: cache read-back (llama_state.c; for a split
 * sliding-window cache through the cache tensors, llama_cells.c), cache
 * writes in place (llama_cells.c), evicting whole positions, attention
 * probabilities when flash attention is off (kq_soft_max, cells turned into
 * positions).
 *
 * Not offered (and why): attention probabilities with flash attention on
 * (the softmax is never materialized), key selection (it would mean writing
 * -inf into kq per head and query before the softmax; not written),
 * per-(layer, head) eviction (llama.cpp's cells are per position over every
 * layer and head of a cache), writing a position llama.cpp does not hold
 * (cells are made by decoding; see llama_cells.c), overwriting a cached
 * position by a forward (llama.cpp continues a sequence at its last
 * position + 1; the host evicts the tail first instead).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugins/llama.cpp/llama_impl.h"

#ifndef KVV_LLAMA_CPP_DIR
#define KVV_LLAMA_CPP_DIR "deps/llama.cpp"
#endif

typedef struct {
    char fa[16];
    int extra_bufts;
    int n_gpu_layers;       /* -1: all */
    char lib_dir[1024];
    int verbose;
    int bench;
    int kv_unified;
} options;

static int parse_options(const kvv_plugin_params *p, options *o, kvv_plugin_error *err)
{
    const char *env = getenv("KVV_LLAMA_CPP_DIR");
    snprintf(o->fa, sizeof o->fa, "auto");
    o->extra_bufts = 1;
    o->n_gpu_layers = -1;
    snprintf(o->lib_dir, sizeof o->lib_dir, "%s", env && *env ? env : KVV_LLAMA_CPP_DIR);
    o->verbose = getenv("KVV_PLUGIN_VERBOSE") != NULL;
    o->kv_unified = 0; /* llama_context_default_params' */
    o->bench = 0;
    for (int i = 0; i < p->n_options; i++) {
        const char *kv = p->options[i], *eq = strchr(kv, '=');
        if (!eq)
            return lp_fail(err, KVV_PLUGIN_ERR_USAGE, "engine option '%s' is not KEY=VALUE", kv);
        const char *v = eq + 1;
        size_t kl = (size_t)(eq - kv);
        char *end;
        long num = strtol(v, &end, 10);
        bool is_num = *v && *end == '\0';
#define KEY(s) (kl == strlen(s) && strncmp(kv, s, kl) == 0)
        if (KEY("flash_attn") && (!strcmp(v, "auto") || !strcmp(v, "on") || !strcmp(v, "off")))
            snprintf(o->fa, sizeof o->fa, "%s", v);
        else if (KEY("extra_bufts") && is_num && (num == 0 || num == 1))
            o->extra_bufts = (int)num;
        else if (KEY("n_gpu_layers") && is_num && num >= -1 && num <= 100000)
            o->n_gpu_layers = (int)num;
        else if (KEY("lib_dir") && *v)
            snprintf(o->lib_dir, sizeof o->lib_dir, "%s", v);
        else if (KEY("verbose") && is_num && (num == 0 || num == 1))
            o->verbose = (int)num;
        else if (KEY("bench") && is_num && (num == 0 || num == 1))
            o->bench = (int)num;
        else if (KEY("kv_unified") && is_num && (num == 0 || num == 1))
            o->kv_unified = (int)num;
        else
            return lp_fail(err, KVV_PLUGIN_ERR_USAGE,
                           "engine option '%s' not understood (known: flash_attn=auto|on|off, "
                           "extra_bufts=0|1, n_gpu_layers=N, lib_dir=PATH, verbose=0|1, "
                           "bench=0|1, kv_unified=0|1)",
                           kv);
#undef KEY
    }
    return KVV_PLUGIN_OK;
}

/* ------------------------------------------------------------ devices */

/* The library folder of a device; NO_DEVICE when it is not installed. */
static int device_dir(const options *o, const char *device, char *dir, size_t size,
                      kvv_plugin_error *err)
{
    static const struct { const char *name, *sub, *fetch; } dev[] = {
        {"cpu", "linux-x64", "sh scripts/install-deps.sh"},
        {"vulkan", "linux-x64-vulkan", "sh scripts/install-deps.sh"},
        {"cuda", "linux-x64-cuda", "sh scripts/fetch-llama-cpp.sh --cuda"},
    };
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        if (strcmp(device, dev[i].name) == 0) {
            snprintf(dir, size, "%s/%s", o->lib_dir, dev[i].sub);
            if (access(dir, R_OK) != 0)
                return lp_fail(err, i == 2 ? KVV_PLUGIN_ERR_NO_DEVICE : KVV_PLUGIN_ERR_IO,
                               "%s%s not installed: %s missing (%s)",
                               i == 2 ? "no CUDA device: " : "", dev[i].name, dir, dev[i].fetch);
            return KVV_PLUGIN_OK;
        }
    return lp_fail(err, KVV_PLUGIN_ERR_USAGE, "unknown device '%s' (llama.cpp: cpu, vulkan, cuda)",
                   device);
}

/* The ggml device that runs the model: NULL for cpu, else the first GPU
 * device of the wanted backend. */
static int pick_device(kvv_plugin_engine *e, const char *device, ggml_backend_dev_t *out,
                       kvv_plugin_error *err)
{
    const lp_lib *L = e->lib;
    *out = NULL;
    for (size_t i = 0; i < L->ggml_backend_dev_count(); i++) {
        ggml_backend_dev_t d = L->ggml_backend_dev_get(i);
        enum ggml_backend_dev_type t = L->ggml_backend_dev_type(d);
        const char *name = L->ggml_backend_dev_name(d);
        bool gpu = t == GGML_BACKEND_DEVICE_TYPE_GPU || t == GGML_BACKEND_DEVICE_TYPE_IGPU;
        bool cpu = t == GGML_BACKEND_DEVICE_TYPE_CPU;
        bool match = strcmp(device, "cpu") == 0 ? cpu
                     : strcmp(device, "vulkan") == 0 ? gpu && strncmp(name, "Vulkan", 6) == 0
                                                     : gpu && strncmp(name, "CUDA", 4) == 0;
        if (match) {
            snprintf(e->device, sizeof e->device, "%s (%s)", name,
                     L->ggml_backend_dev_description(d));
            *out = cpu ? NULL : d;
            return KVV_PLUGIN_OK;
        }
    }
    if (strcmp(device, "cpu") == 0)
        return lp_fail(err, KVV_PLUGIN_ERR_INTERNAL, "ggml registered no CPU device");
    return lp_fail(err, KVV_PLUGIN_ERR_NO_DEVICE,
                   "no %s device: ggml's %s backend found none%s", device, device,
                   strcmp(device, "vulkan") == 0
                       ? " (a CPU-type Vulkan device such as Mesa's lavapipe needs "
                         "GGML_VK_VISIBLE_DEVICES=0)"
                       : " (no NVIDIA GPU or driver here)");
}

/* ------------------------------------------------------------ open/close */

static void lp_close(kvv_plugin_engine *e)
{
    if (!e)
        return;
    if (e->lib) {
        if (e->batch.token)
            e->lib->llama_batch_free(e->batch);
        if (e->scratch)
            e->lib->llama_free(e->scratch);
        if (e->ctx)
            e->lib->llama_free(e->ctx);
        if (e->threadpool) /* after the context that computed on it */
            e->lib->ggml_threadpool_free(e->threadpool);
        if (e->model)
            e->lib->llama_model_free(e->model);
    }
    lp_state_free(&e->state);
    lp_cells_free(&e->cells);
    free(e->attn);
    free(e->ops.rows);
    free(e->key_pos);
    free(e->ub_start);
    free(e->scratch_cells);
    free(e->rows);
    free(e->krows);
    free(e->vrows);
    free(e->cache_bytes);
    free(e);
}

static int model_dims(kvv_plugin_engine *e, kvv_plugin_error *err)
{
    const lp_lib *L = e->lib;
    char buf[64], key[96];
    e->n_layer = L->llama_model_n_layer(e->model);
    e->n_embd = L->llama_model_n_embd(e->model);
    e->n_head = L->llama_model_n_head(e->model);
    e->n_head_kv = L->llama_model_n_head_kv(e->model);
    e->n_vocab = L->llama_vocab_n_tokens(L->llama_model_get_vocab(e->model));
    if (L->llama_model_meta_val_str(e->model, "general.architecture", e->arch, sizeof e->arch) < 0)
        return lp_fail(err, KVV_PLUGIN_ERR_FORMAT, "the model names no general.architecture");
    e->head_dim = e->n_head > 0 ? e->n_embd / e->n_head : 0;
    snprintf(key, sizeof key, "%s.attention.key_length", e->arch);
    if (L->llama_model_meta_val_str(e->model, key, buf, sizeof buf) > 0)
        e->head_dim = atoi(buf);
    e->head_dim_v = e->head_dim;
    snprintf(key, sizeof key, "%s.attention.value_length", e->arch);
    if (L->llama_model_meta_val_str(e->model, key, buf, sizeof buf) > 0)
        e->head_dim_v = atoi(buf);
    e->kd = e->n_head_kv * e->head_dim;
    e->vd = e->n_head_kv * e->head_dim_v;
    /* gemma scales the token embeddings into a node of its own */
    e->layer0_name = strncmp(e->arch, "gemma", 5) == 0 ? "inp_scaled" : "embd";
    return KVV_PLUGIN_OK;
}

/* llama-bench's default logical batch (cmd_params_defaults.n_batch). */
#define LP_BENCH_N_BATCH 2048

/* Which context new_context makes. */
typedef enum {
    CTX_ENGINE,  /* the engine's */
    CTX_PROBE,   /* the engine's settings with the graph callback: the open's probe, and
                    on the CPU kv_from_residual's scratch */
    CTX_SCRATCH  /* kv_from_residual's off the CPU */
} ctx_kind;

/* The engine's context, or (scratch) the one kv_from_residual decodes in.
 * Off the CPU the scratch context runs without flash attention: its K/V
 * rows do not depend on how attention is computed (they are stored before
 * it), and lavapipe's flash-attention shaders crash on the scratch's
 * decodes at positions past an empty cache (kvdirect on Vulkan, SIGSEGV in
 * libvulkan_lvp's worker thread). With bench=1 the engine's context is
 * llama-bench's (to_llama_cparams in tools/llama-bench/llama-bench.cpp):
 * no callback, n_batch 2048, swa_full off. */
static struct llama_context *new_context(kvv_plugin_engine *e, ctx_kind kind)
{
    static const enum ggml_type types[] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16};
    const bool bench = e->bench && kind != CTX_SCRATCH, observed = !e->bench || kind != CTX_ENGINE;
    struct llama_context_params cp = e->lib->llama_context_default_params();
    cp.n_ctx = (uint32_t)e->n_ctx;
    /* normally any forward is one llama_decode; bench splits longer ones */
    cp.n_batch = (uint32_t)(bench ? LP_BENCH_N_BATCH : e->n_ctx);
    cp.n_ubatch = (uint32_t)e->n_ubatch;
    cp.n_seq_max = 1;
    if (kind == CTX_ENGINE && e->n_seq_max > 1) { /* the engine's: its sequences */
        cp.n_seq_max = (uint32_t)e->n_seq_max;
        cp.n_ctx = (uint32_t)e->n_ctx * (uint32_t)e->n_seq_max; /* n_ctx each */
        cp.kv_unified = e->kv_unified != 0;
    }
    cp.n_threads = cp.n_threads_batch = e->n_threads;
    cp.flash_attn_type = strcmp(e->fa, "on") == 0    ? LLAMA_FLASH_ATTN_TYPE_ENABLED
                         : strcmp(e->fa, "off") == 0 ? LLAMA_FLASH_ATTN_TYPE_DISABLED
                                                     : LLAMA_FLASH_ATTN_TYPE_AUTO;
    if (kind == CTX_SCRATCH)
        cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.type_k = cp.type_v = types[e->cache_type];
    cp.cb_eval = observed ? lp_eval_cb : NULL;
    cp.cb_eval_user_data = observed ? e : NULL;
    cp.swa_full = !bench;
    cp.no_perf = true;
    return e->lib->llama_init_from_model(e->model, cp);
}

/* bench on the CPU: a ggml thread pool for the engine's context, made as
 * llama-bench makes it (ggml_threadpool_params_default: poll 50, no CPU
 * mask, normal priority). @return false when the CPU backend offers none
 * (ggml then makes one per graph compute, as without bench). */
static bool attach_threadpool(kvv_plugin_engine *e)
{
    const lp_lib *L = e->lib;
    if (!L->ggml_threadpool_new)
        return false;
    struct ggml_threadpool_params tpp = L->ggml_threadpool_params_default(e->n_threads);
    e->threadpool = L->ggml_threadpool_new(&tpp);
    if (e->threadpool)
        L->llama_attach_threadpool(e->ctx, e->threadpool, NULL);
    return e->threadpool != NULL;
}

static int lp_open(const kvv_plugin_host *host, const kvv_plugin_params *p,
                   kvv_plugin_engine **out, kvv_plugin_info *info, kvv_plugin_error *err)
{
    *out = NULL;
    options o;
    int code = parse_options(p, &o, err);
    const char *device = p->device[0] ? p->device : "cpu";
    char dir[1100], msg[512];
    if (!code)
        code = device_dir(&o, device, dir, sizeof dir, err);
    if (code)
        return code;
    if (p->cache_type < KVV_PLUGIN_DTYPE_F32 || p->cache_type > KVV_PLUGIN_DTYPE_BF16)
        return lp_fail(err, KVV_PLUGIN_ERR_UNSUPPORTED, "cache type %d", p->cache_type);
    /* ggml-vulkan ignores CPU-type devices (lavapipe) unless told which to use */
    if (strcmp(device, "vulkan") == 0)
        setenv("GGML_VK_VISIBLE_DEVICES", "0", 0);
    kvv_plugin_engine *e = calloc(1, sizeof *e);
    if (!e)
        return lp_fail(err, KVV_PLUGIN_ERR_NOMEM, "open: out of memory");
    e->host = host;
    e->fa_seen = -1;
    if (lp_lib_get(dir, &e->lib, msg, sizeof msg)) {
        lp_close(e);
        return lp_fail(err, KVV_PLUGIN_ERR_IO, "%s", msg);
    }
    e->lib->verbose = o.verbose;
    ggml_backend_dev_t dev;
    if ((code = pick_device(e, device, &dev, err))) {
        lp_close(e);
        return code;
    }
    ggml_backend_dev_t devs[2] = {dev, NULL};
    struct llama_model_params mp = e->lib->llama_model_default_params();
    mp.devices = devs; /* {NULL}: no offload device, the CPU only */
    mp.n_gpu_layers = dev ? o.n_gpu_layers : 0;
    mp.use_extra_bufts = o.extra_bufts != 0;
    e->extra_bufts = o.extra_bufts != 0;
    e->lib->last_error[0] = '\0';
    e->model = e->lib->llama_model_load_from_file(p->model_path, mp);
    if (!e->model) {
        code = lp_fail(err, KVV_PLUGIN_ERR_FORMAT, "llama.cpp cannot load %s%s%s", p->model_path,
                       e->lib->last_error[0] ? ": " : "", e->lib->last_error);
        lp_close(e);
        return code;
    }
    if ((code = model_dims(e, err))) {
        lp_close(e);
        return code;
    }
    snprintf(e->fa, sizeof e->fa, "%s", o.fa);
    e->bench = o.bench != 0;
    e->cache_type = p->cache_type;
    e->n_ctx = p->n_ctx;
    e->n_threads = p->n_threads > 0 ? p->n_threads : 1;
    /* bench: llama-bench's 512, which llama.cpp caps by n_batch */
    e->n_seq_max = p->n_seq_max > 1 ? p->n_seq_max : 1;
    e->kv_unified = o.kv_unified;
    lp_copies_done(e);
    if (e->n_seq_max > KVV_LP_MAX_SEQS) {
        lp_close(e);
        return lp_fail(err, KVV_PLUGIN_ERR_UNSUPPORTED, "open: %d sequences asked for, this "
                       "plugin serves up to %d", p->n_seq_max, KVV_LP_MAX_SEQS);
    }
    e->n_ubatch = p->n_ubatch > 0 && p->n_ubatch < e->n_ctx ? p->n_ubatch
                  : e->n_ctx < 512 && !e->bench ? e->n_ctx : 512;
    e->ctx = new_context(e, CTX_ENGINE);
    e->scratch = e->ctx ? new_context(e, CTX_PROBE) : NULL;
    size_t width = (size_t)e->n_embd * 2; /* a residual and its copy, or attention output */
    if ((size_t)e->n_head * e->head_dim_v > width)
        width = (size_t)e->n_head * e->head_dim_v;
    e->rows = malloc((size_t)e->n_ubatch * width * sizeof *e->rows);
    e->krows = malloc((size_t)e->n_ubatch * e->kd * sizeof *e->krows);
    e->vrows = malloc((size_t)e->n_ubatch * e->vd * sizeof *e->vrows);
    e->key_pos = malloc((size_t)e->n_ctx * sizeof *e->key_pos);
    e->ub_start = malloc((size_t)e->n_ctx * sizeof *e->ub_start);
    e->scratch_cells = malloc((size_t)e->n_ctx * sizeof *e->scratch_cells);
    if (e->ctx)
        e->batch = e->lib->llama_batch_init(e->n_ctx, 0, 1);
    if (!e->ctx || !e->scratch || !e->rows || !e->krows || !e->vrows || !e->batch.token ||
        !e->key_pos || !e->ub_start || !e->scratch_cells || lp_cells_init(e)) {
        code = lp_fail(err, e->ctx ? KVV_PLUGIN_ERR_NOMEM : KVV_PLUGIN_ERR_INTERNAL,
                       "llama.cpp cannot create a context for %s (%d positions, %s cache)%s%s",
                       p->model_path, p->n_ctx, p->cache_type == 0 ? "f32" : p->cache_type == 1 ? "f16" : "bf16",
                       e->lib->last_error[0] ? ": " : "", e->lib->last_error);
        lp_close(e);
        return code;
    }
    e->caps = KVV_PLUGIN_CAP_LOGITS_ALL | KVV_PLUGIN_CAP_RESIDUAL_READ |
              KVV_PLUGIN_CAP_RESIDUAL_WRITE | KVV_PLUGIN_CAP_KV_HOOK | KVV_PLUGIN_CAP_KV_READ |
              KVV_PLUGIN_CAP_KV_FROM_RESIDUAL | KVV_PLUGIN_CAP_ATTN_OUT |
              KVV_PLUGIN_CAP_KV_EVICT | KVV_PLUGIN_CAP_KV_WRITE | KVV_PLUGIN_CAP_THREADS |
              KVV_PLUGIN_CAP_UBATCH;
    /* the softmax exists as a node only without flash attention; what auto
     * chose shows in the graph of one token (the scratch context, which
     * has the callback in bench mode too) */
    if ((code = lp_probe(e, err))) {
        lp_close(e);
        return code;
    }
    if (e->fa_seen == 0)
        e->caps |= KVV_PLUGIN_CAP_ATTN;
    if (e->ops.seen && info->struct_size >= offsetof(kvv_plugin_info, ops) + sizeof info->ops) {
        e->caps |= KVV_PLUGIN_CAP_OP_TAPS; /* a 1.1 host */
        e->ops.on = true;
        info->ops = e->ops.seen;
    }
    e->split_cache = e->lib->llama_model_n_swa(e->model) > 0;
    e->on_cpu = dev == NULL;
    e->n_batch = (int)e->lib->llama_n_ctx(e->ctx);
    if (e->bench) {
        /* nothing is observed: the scratch context goes, and with it every
         * capability that needs the graph callback */
        e->lib->llama_free(e->scratch);
        e->scratch = NULL;
        e->caps = KVV_PLUGIN_CAP_LOGITS_ALL | KVV_PLUGIN_CAP_KV_EVICT | KVV_PLUGIN_CAP_THREADS |
                  KVV_PLUGIN_CAP_UBATCH | (e->split_cache ? 0 : KVV_PLUGIN_CAP_KV_READ);
        if (e->n_batch > LP_BENCH_N_BATCH)
            e->n_batch = LP_BENCH_N_BATCH;
        if (e->n_ubatch > e->n_batch)
            e->n_ubatch = e->n_batch; /* as llama.cpp caps it */
        if (e->on_cpu)
            attach_threadpool(e);
    } else if (!e->on_cpu) { /* the scratch without flash attention: see new_context */
        e->lib->llama_free(e->scratch);
        if (!(e->scratch = new_context(e, CTX_SCRATCH))) {
            lp_close(e);
            return lp_fail(err, KVV_PLUGIN_ERR_NOMEM, "llama.cpp: cannot make the scratch context");
        }
    }
    info->caps = e->caps;
    info->n_layer = e->n_layer;
    info->n_embd = e->n_embd;
    info->n_head = e->n_head;
    info->n_head_kv = e->n_head_kv;
    info->head_dim = e->head_dim;
    info->head_dim_v = e->head_dim_v;
    info->n_vocab = e->n_vocab;
    info->n_ctx = (int)e->lib->llama_n_ctx(e->ctx) / e->n_seq_max; /* each sequence's */
    info->cache_type = e->cache_type;
    info->n_threads = e->n_threads;
    info->n_ubatch = e->n_ubatch;
    info->controls = 0; /* llama.cpp's kernels cannot plant them: the host does */
    if (!e->split_cache) /* a split cache is read through its tensors: sequence 0 only */
        info->caps |= KVV_PLUGIN_CAP_SEQS;
    info->n_seq_max = e->n_seq_max;
    info->kv_unified = e->kv_unified;
    *out = e;
    return KVV_PLUGIN_OK;
}

/* ------------------------------------------------------------ the cache */

static int lp_kv_clear(kvv_plugin_engine *e, kvv_plugin_error *err)
{
    (void)err;
    lp_cells_flush(e);
    e->lib->llama_memory_clear(e->lib->llama_get_memory(e->ctx), true);
    lp_cells_forget(e, -1);
    e->gen++;
    return KVV_PLUGIN_OK;
}

static int lp_kv_evict(kvv_plugin_engine *e, int layer, int pos, int head, kvv_plugin_error *err)
{
    if (layer != -1 || head != -1)
        return lp_fail(err, KVV_PLUGIN_ERR_UNSUPPORTED,
                       "kv_evict: llama.cpp's cache cells span every layer and head");
    e->gen++;
    lp_cells_flush(e);
    if (!e->lib->llama_memory_seq_rm(e->lib->llama_get_memory(e->ctx), 0, pos, pos + 1))
        return lp_fail(err, KVV_PLUGIN_ERR_INTERNAL, "kv_evict: llama_memory_seq_rm(%d) failed",
                       pos);
    lp_cells_forget(e, pos);
    return KVV_PLUGIN_OK;
}

/* ------------------------------------------------------------ describe */

/* "KEY=VALUE" of llama.cpp's versions file, or "". */
static void version_of(const kvv_plugin_engine *e, const char *key, char *out, size_t size)
{
    char path[1100], line[256];
    out[0] = '\0';
    snprintf(path, sizeof path, "%s/../versions", e->lib->dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, kl) == 0 && line[kl] == '=') {
            line[strcspn(line, "\n")] = '\0';
            snprintf(out, size, "%s", line + kl + 1);
            break;
        }
    fclose(f);
}

static void lp_describe(kvv_plugin_engine *e, kvv_plugin_desc *d)
{
    const lp_lib *L = e->lib;
    char release[32], nlc[32];
    version_of(e, "llama.cpp", release, sizeof release);
    version_of(e, "node-llama-cpp", nlc, sizeof nlc);
    snprintf(d->mode, sizeof d->mode, "native");
    int w = snprintf(d->version, sizeof d->version, "llama.cpp %.15s (node-llama-cpp %.15s) ggml %.15s %.15s",
                     release[0] ? release : "?", nlc[0] ? nlc : "?", L->ggml_version(),
                     L->ggml_commit());
    snprintf(d->device, sizeof d->device, "%s", e->device);
    snprintf(d->variant, sizeof d->variant, "%s", L->variant[0] ? L->variant : "?");
    w |= snprintf(d->flash_attn, sizeof d->flash_attn, "%.4s%s", e->fa,
                  strcmp(e->fa, "auto") != 0 || e->fa_seen < 0 ? ""
                  : e->fa_seen                                 ? "(on)"
                                                               : "(off)");
    (void)w; /* truncation only shortens a report string */
    /* the build flags that decide kernels: "LLAMAFILE = 1 | REPACK = 1 ..." */
    const char *sys = L->llama_print_system_info();
    const char *lf = strstr(sys, "LLAMAFILE"), *rp = strstr(sys, "REPACK");
    char ops[120];
    lp_ops_describe(e, ops, sizeof ops);
    int n = snprintf(d->kernels, sizeof d->kernels, "llamafile=%c repack=%c extra_bufts=%d%s; %s",
                     lf ? lf[12] : '?', rp ? rp[9] : '?', e->extra_bufts,
                     e->n_seq_max > 1 ? (e->kv_unified ? " kv_unified=1" : " kv_unified=0") : "",
                     ops);
    if (e->bench && n > 0 && (size_t)n < sizeof d->kernels)
        snprintf(d->kernels + n, sizeof d->kernels - (size_t)n,
                 " bench=1 (llama-bench's context: no eval callback, n_batch %d, n_ubatch %d, "
                 "swa_full=0, threadpool=%s)",
                 e->n_batch, e->n_ubatch, e->threadpool ? "ggml" : "per-graph");
}

static const kvv_plugin_table llama_table = {
    .abi_major = KVV_PLUGIN_ABI_MAJOR,
    .abi_minor = KVV_PLUGIN_ABI_MINOR,
    .struct_size = sizeof(kvv_plugin_table),
    .name = "llama.cpp",
    .version = "1.0",
    .devices = "cpu,vulkan,cuda",
    .options_help = "flash_attn=auto|on|off  flash attention (default auto)\n"
                    "extra_bufts=1|0         weight repacking (default 1)\n"
                    "n_gpu_layers=N          layers offloaded on vulkan/cuda (default all)\n"
                    "lib_dir=PATH            the deps/llama.cpp folder\n"
                    "verbose=0|1             llama.cpp's log on stderr\n"
                    "bench=0|1               run as llama-bench does: no graph callback, no\n"
                    "                        hooks (default 0; kvverify bench sets 1)\n"
                    "kv_unified=0|1          sequences share one cell pool (default 0)\n",
    .open = lp_open,
    .close = lp_close,
    .forward = lp_forward,
    .kv_clear = lp_kv_clear,
    .describe = lp_describe,
    .kv_from_residual = lp_kv_from_residual,
    .kv_read = lp_kv_read,
    .kv_evict = lp_kv_evict,
    .kv_write = lp_kv_write,
    .decode = lp_decode,
    .seq_rm = lp_seq_rm,
    .seq_cp = lp_seq_cp,
    .kv_read_seq = lp_kv_read_seq,
};

KVV_PLUGIN_EXPORT const kvv_plugin_table *kvv_plugin_entry(void)
{
    return &llama_table;
}
