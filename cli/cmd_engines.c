/*
 * cmd_engines.c — `kvverify engines [MODEL]`: the engines kvverify can run,
 * built-in and plugins found (engine.h kvv_engine_catalog), with their
 * modes, devices and (cpu) kernel tables; with MODEL, each engine and mode
 * opened on it: its capabilities, where its kernels switch with the batch
 * size (what the audit's floor straddles) and its kernels.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "cli/output_opts.h"
#include "engine/cpu/cpu_isa.h"
#include "engine/engine_registry.h"

#define MAX_ENGINES 32

static void usage(FILE *f)
{
    fprintf(f, "usage: kvverify engines [MODEL] [--json [FILE|-]]\n\n"
            "The engines --engine takes: the built-in reference (ref) and optimized cpu\n"
            "engines, llama.cpp and every plugin NAME.so found in $KVV_PLUGIN_DIR or\n"
            "plugins/ beside kvverify (docs/plugins.md), each with its modes and devices;\n"
            "the cpu engine's kernel tables (--isa) and which run on this CPU. With MODEL,\n"
            "each engine and mode is opened on it and shows its capabilities (what a\n"
            "plugin declares; a check needing one it lacks is reported unsupported), the\n"
            "batch sizes where its kernels switch (what the audit's workload straddles)\n"
            "and its kernels.\n\n"
            "  --json [FILE|-]     one JSON object to FILE (--json=FILE), or alone / - to\n"
            "                      stdout\n\n"
            "exit codes: 0 listed, 2 bad usage or MODEL unreadable\n");
}

static bool own_option(void *state, kvv_opts *o)
{
    const char **model = state;
    if (!kvv_opts_positional(o) || *model)
        return false;
    *model = o->arg;
    return true;
}

/* The modes an engine is opened in: each of its own (a plugin reports its
 * own once opened in its default). @return how many, <= KVV_MODE_COUNT. */
static int modes_of(const kvv_engine_info *e, kvv_mode *out)
{
    if (e->plugin)
        return out[0] = kvv_engine_default_mode(e->name), 1;
    int n = 0;
    for (int m = 0; m < KVV_MODE_COUNT; m++)
        if (kvv_engine_has_mode(e->name, (kvv_mode)m))
            out[n++] = (kvv_mode)m;
    return n;
}

/* The cpu engine's kernel tables, as text or JSON. */
static json_t *isa_tables(FILE *f)
{
    kvv_cpu_isa_info ci;
    kvv_error err = {0};
    json_t *a = json_array();
    if (kvv_cpu_isa_probe(&ci, &err)) {
        if (f)
            fprintf(f, "             kernel tables: %s\n", err.msg);
        return a;
    }
    if (f)
        fprintf(f, "             kernel tables (--isa):");
    for (int i = 0; i < KVV_CPU_ISA_COUNT; i++) {
        int lanes, fused;
        if (!kvv_cpu_isa_order((kvv_cpu_isa)i, &lanes, &fused))
            continue;
        const char *name = kvv_cpu_isa_name((kvv_cpu_isa)i);
        json_array_append_new(a, json_pack("{s:s, s:b, s:b, s:i}", "name", name, "runs_here",
                                           ci.can_run[i], "default", (int)ci.best == i,
                                           "lanes", lanes));
        if (f)
            fprintf(f, " %s (%s%s)", name, ci.can_run[i] ? "runs here" : "not on this CPU",
                    (int)ci.best == i ? ", default" : "");
    }
    if (f)
        fprintf(f, "\n");
    return a;
}

/* Engine e in mode m opened on model: capabilities, switches, kernels. */
static json_t *on_model(FILE *f, const kvv_model *model, const kvv_engine_info *e, kvv_mode m)
{
    kvv_engine_opts o = kvv_engine_opts_default();
    o.name = e->name;
    o.mode = m;
    o.n_ctx = 16;
    kvv_engine *eng;
    kvv_error err = {0};
    if (kvv_engine_open(model, &o, &eng, &err)) {
        if (f)
            fprintf(f, "             %s: cannot open on this model: %s\n", kvv_mode_name(m),
                    err.msg);
        return json_pack("{s:s, s:s}", "mode", kvv_mode_name(m), "error", err.msg);
    }
    kvv_engine_desc d;
    kvv_engine_describe(eng, &d);
    char caps[512], sw[64];
    kvv_engine_cap_names(kvv_engine_caps(eng), caps, sizeof caps);
    kvv_batch_paths p;
    kvv_engine_batch_paths(eng, &p);
    kvv_batch_paths_list(&p, sw, sizeof sw);
    json_t *jsw = json_array();
    for (int k = 0; k < p.n; k++)
        json_array_append_new(jsw, json_pack("{s:i, s:s}", "at", p.sw[k].at, "what",
                                             p.sw[k].what));
    if (f) {
        fprintf(f, "             %s: %s\n", d.mode, d.kernels[0] ? d.kernels : "(no kernels described)");
        fprintf(f, "               capabilities: %s\n", caps[0] ? caps : "none");
        fprintf(f, "               kernel switches: %s%s\n", sw,
                p.known ? "" : " (not described: every batch size counts as its own path)");
        for (int k = 0; k < p.n; k++)
            fprintf(f, "                 at %d tokens: %s\n", p.sw[k].at, p.sw[k].what);
    }
    json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:o, s:b}", "mode", d.mode, "kernels",
                          d.kernels, "isa", d.isa, "capabilities", caps, "kernel_switches",
                          jsw, "switches_known", p.known);
    kvv_engine_close(eng);
    return j;
}

int kvv_cmd_engines(int argc, char **argv)
{
    kvv_opts o;
    kvv_opts_init(&o, "engines", argc, argv);
    kvv_output_cli out;
    kvv_output_cli_init(&out, "engines", KVV_OUT_JSON);
    const char *model_path = NULL;
    const kvv_opt_group g[] = {kvv_output_cli_group(&out), {own_option, NULL, &model_path}};
    int code = kvv_opts_parse(&o, usage, g, 2);
    if (code != KVV_OPTS_RUN)
        return code;
    kvv_model *model = NULL;
    kvv_error err = {0};
    if (model_path && kvv_model_open(model_path, &model, &err))
        return kvv_cli_fail(&err);
    kvv_engine_info *list = calloc(MAX_ENGINES, sizeof *list);
    if (!list) {
        kvv_model_close(model);
        fprintf(stderr, "kvverify engines: out of memory\n");
        return KVV_EXIT_BAD_INPUT;
    }
    int n = kvv_engine_catalog(list, MAX_ENGINES);
    FILE *f = out.stdout_taken ? NULL : stdout;
    if (f)
        fprintf(f, "engines (--engine NAME)%s%s:\n", model ? " on " : "",
                model ? model_path : "");
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) {
        const kvv_engine_info *e = &list[i];
        if (f) {
            fprintf(f, "  %-10s %-9s modes %-16s devices %s\n", e->name,
                    e->plugin ? "plugin" : "built-in", e->modes[0] ? e->modes : "-",
                    e->devices[0] ? e->devices : "-");
            if (e->plugin && e->path[0])
                fprintf(f, "             %s%s%s\n", e->path, e->version[0] ? ", version " : "",
                        e->version);
            if (e->status[0])
                fprintf(f, "             %s\n", e->status);
        }
        json_t *j = json_pack("{s:s, s:b, s:s, s:s, s:s, s:s, s:s}", "name", e->name, "plugin",
                              e->plugin, "modes", e->modes, "devices", e->devices, "version",
                              e->version, "path", e->path, "status", e->status);
        if (kvv_engine_takes(e->name, KVV_ENGINE_OPT_ISA))
            json_object_set_new(j, "kernel_tables", isa_tables(f));
        if (model && (!e->plugin || !e->status[0])) {
            kvv_mode modes[KVV_MODE_COUNT];
            int nm = modes_of(e, modes);
            json_t *jm = json_array();
            for (int k = 0; k < nm; k++)
                json_array_append_new(jm, on_model(f, model, e, modes[k]));
            json_object_set_new(j, "on_model", jm);
        }
        json_array_append_new(arr, j);
    }
    if (f && !model)
        fprintf(f, "(kvverify engines MODEL opens each on MODEL: capabilities, kernel switches)\n");
    if (out.json_path) {
        json_t *root = json_pack("{s:o}", "engines", arr);
        if (model)
            json_object_set_new(root, "model", json_string(model_path));
        code = kvv_output_write_json(out.json_path, root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        json_decref(root);
    } else {
        json_decref(arr);
        code = 0;
    }
    free(list);
    kvv_model_close(model);
    return code;
}
