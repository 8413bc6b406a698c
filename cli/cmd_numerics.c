/*
 * cmd_numerics.c — `kvverify numerics MODEL`: each engine's ops against the
 * correctly rounded result (MPFR) on the real inputs of a forward pass, in
 * ULPs (verify/numerics/numerics.h, docs/numerics.md). Options, the console
 * tables and the --json report (numbers encoded as common/json_num.h says:
 * a NaN ULP distance is null, as in every report).
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "cli/check_cli.h"
#include "verify/numerics/numerics.h"
#include "verify/report/report.h"

static void numerics_cli(kvv_check_cli *c);

static void help(FILE *f)
{
    fprintf(f, "usage: kvverify numerics MODEL [options]\n\n"
            "Run the reference forward pass over the prompt, capture the real inputs of every\n"
            "op on sampled rows of every layer (residual rows -> rmsnorm, normed rows x weight\n"
            "rows -> matmul, q.k -> dot, attention scores -> softmax, Q/K before RoPE -> rope,\n"
            "FFN gate values -> silu and gelu, final logits -> softcap), feed the same fp32\n"
            "inputs to each engine's op and to the MPFR oracle, and print each op's error in\n"
            "ULPs of the correctly rounded result (max, mean, histogram), per op and per\n"
            "layer, with where the largest error is; then the engines' portable math\n"
            "(exp, tanh, sin, cos, pow) on dense samples of their input ranges.\n\n"
            "  --samples N         token rows measured per layer (default 4; --seed also\n"
            "                      picks them)\n"
            "  --max-outputs N     weight rows measured per matrix and row (default 256)\n"
            "  --math-samples N    samples per math function and range (default 20000; 0 off)\n"
            "The negative control (on unless --no-controls): a planted op set, the correctly\n"
            "rounded result moved by 1 ULP, must be measured as exactly 1 ULP everywhere.\n"
            "--force-fail flips one bit of one rebuilt input, which the rebuild check must\n"
            "find (exit 1). (--control, its old name, is still taken, with a note.)\n\n");
    kvv_check_cli c;
    numerics_cli(&c);
    kvv_check_cli_help(f, &c);
    kvv_check_cli_free(&c);
}

/* ------------------------------------------------------------ console */

/* Histogram columns: 0, 1, 2, 3-4, 5-8, 9-16, >16 (oracle bins 6.. folded). */
#define N_COLS 7
static void fold(const kvv_oracle_hist *h, uint64_t out[N_COLS])
{
    for (int k = 0; k < N_COLS; k++)
        out[k] = 0;
    for (int k = 0; k < KVV_ULP_HIST_BINS; k++)
        out[k < N_COLS - 1 ? k : N_COLS - 1] += h->bins[k];
}

static const char *ulp_text(uint64_t u, char *buf, size_t size)
{
    if (u == KVV_ULP_NAN)
        snprintf(buf, size, "nan");
    else
        snprintf(buf, size, "%llu", (unsigned long long)u);
    return buf;
}

/* The max over a cell: NaN mismatches count as the largest. */
static uint64_t cell_max(const kvv_numerics_cell *c)
{
    return c->hist.nan ? KVV_ULP_NAN : c->hist.max;
}

static void print_where(const kvv_numerics_where *w, int n_layer)
{
    char u[24], lay[16], in[40] = "";
    if (w->layer == n_layer)
        snprintf(lay, sizeof lay, "output");
    else
        snprintf(lay, sizeof lay, "layer %d", w->layer);
    if (!isnan(w->input))
        snprintf(in, sizeof in, "input %.9g, ", (double)w->input);
    printf("%s ULP at %s, row %d, index %d (%s): %sgot %.9g (%a), exact %.9g (%a)\n",
           ulp_text(w->ulp, u, sizeof u), lay, w->row, w->index, w->what, in, (double)w->got,
           (double)w->got, (double)w->exact, (double)w->exact);
}

static void print_report(const kvv_numerics_report *rep, bool quiet)
{
    char u[24];
    printf("\nop        engine            values      max      mean        0        1        2"
           "      3-4      5-8     9-16      >16  nan  max/ulp(sum|ab|)\n");
    for (int op = 0; op < KVV_OP_COUNT; op++) {
        for (int e = 0; e < rep->n_engines; e++) {
            const kvv_numerics_engine *en = &rep->engines[e];
            char name[16];
            snprintf(name, sizeof name, "%s%s", e == 0 ? kvv_op_name((kvv_op)op) : "",
                     e == 0 && !rep->used[op] ? "*" : "");
            if (!en->measured[op]) {
                printf("%-9s %-14s  -- %s\n", name, en->name, en->where[op]);
                continue;
            }
            const kvv_numerics_cell *c = &en->total[op];
            uint64_t cols[N_COLS];
            fold(&c->hist, cols);
            printf("%-9s %-14s %9llu %8s %9.4f", name, en->name, (unsigned long long)c->hist.n,
                   ulp_text(cell_max(c), u, sizeof u), kvv_oracle_hist_mean(&c->hist));
            for (int k = 0; k < N_COLS; k++)
                printf(" %8llu", (unsigned long long)cols[k]);
            printf(" %4llu", (unsigned long long)c->hist.nan);
            if (op == KVV_OP_MATMUL || op == KVV_OP_DOT)
                printf("  %.3f", c->max_scaled);
            printf("\n");
        }
    }
    printf("(* not used by this model's forward pass; measured on the same real inputs.\n"
           " max/ulp(sum|ab|): dot products' largest error in ULPs of sum |a[i]*b[i]|, i.e.\n"
           " relative to the terms rather than to the possibly cancelled result)\n");

    printf("\nlargest error per engine and op:\n");
    for (int e = 0; e < rep->n_engines; e++)
        for (int op = 0; op < KVV_OP_COUNT; op++) {
            const kvv_numerics_engine *en = &rep->engines[e];
            if (!en->measured[op] || !en->total[op].worst.set)
                continue;
            printf("  %-14s %-8s ", en->name, kvv_op_name((kvv_op)op));
            print_where(&en->total[op].worst, rep->n_layer);
        }

    if (!quiet) {
        printf("\nper layer: max ULP / mean ULP\nlayer   op      ");
        for (int e = 0; e < rep->n_engines; e++)
            printf(" %22s", rep->engines[e].name);
        printf("\n");
        for (int l = 0; l <= rep->n_layer; l++)
            for (int op = 0; op < KVV_OP_COUNT; op++) {
                bool any = false;
                for (int e = 0; e < rep->n_engines; e++)
                    any = any || kvv_numerics_cell_at(rep, e, l, (kvv_op)op)->hist.n > 0;
                if (!any)
                    continue;
                char lay[16];
                snprintf(lay, sizeof lay, l == rep->n_layer ? "out" : "%d", l);
                printf("%-7s %-8s", lay, kvv_op_name((kvv_op)op));
                for (int e = 0; e < rep->n_engines; e++) {
                    const kvv_numerics_cell *c = kvv_numerics_cell_at(rep, e, l, (kvv_op)op);
                    char cellt[40];
                    if (c->hist.n == 0)
                        snprintf(cellt, sizeof cellt, "-");
                    else
                        snprintf(cellt, sizeof cellt, "%s / %.4f",
                                 ulp_text(cell_max(c), u, sizeof u),
                                 kvv_oracle_hist_mean(&c->hist));
                    printf(" %22s", cellt);
                }
                printf("\n");
            }
    }

    if (rep->n_math > 0) {
        printf("\nportable math, dense samples: error = |got - exact| / ulp(exact); "
               "not CR = not the correctly rounded float\n");
        printf("%-14s %-5s %-46s %8s %11s %7s  %s\n", "engine", "fn", "range", "samples",
               "max err", "not CR", "worst input -> got (correctly rounded)");
        for (int i = 0; i < rep->n_math; i++) {
            const kvv_numerics_math *m = &rep->math[i];
            char x[64];
            if (m->fn == KVV_MATH_POW)
                snprintf(x, sizeof x, "x=%.9g y=%.9g", (double)m->worst_x, (double)m->worst_y);
            else
                snprintf(x, sizeof x, "x=%.9g", (double)m->worst_x);
            printf("%-14s %-5s %-46s %8ld %11.6g %7ld  %s -> %a (%a)\n", m->engine,
                   kvv_math_fn_name(m->fn), m->range, m->samples, m->max_err, m->n_not_rounded,
                   x, (double)m->worst_got, (double)m->worst_exact);
        }
    }
}

/* ------------------------------------------------------------ JSON */

static json_t *cell_json(const kvv_numerics_cell *c)
{
    json_t *hist = json_object();
    for (int k = 0; k < KVV_ULP_HIST_BINS; k++) {
        char label[32];
        if (c->hist.bins[k])
            json_object_set_new(hist, kvv_oracle_hist_label(k, label, sizeof label),
                                json_integer((json_int_t)c->hist.bins[k]));
    }
    json_t *o = json_pack("{s:I, s:I, s:o, s:o, s:o, s:o}", "values", (json_int_t)c->hist.n,
                          "nan", (json_int_t)c->hist.nan, "max", kvv_json_ulp(c->hist.max), "mean",
                          kvv_json_number(kvv_oracle_hist_mean(&c->hist)), "max_scaled",
                          kvv_json_number(c->max_scaled), "histogram", hist);
    if (o && c->worst.set) {
        const kvv_numerics_where *w = &c->worst;
        json_object_set_new(o, "worst",
                            json_pack("{s:i, s:i, s:i, s:s, s:o, s:o, s:o, s:o}", "layer",
                                      w->layer, "row", w->row, "index", w->index, "what",
                                      w->what, "input", kvv_json_float(w->input), "got", kvv_json_float(w->got),
                                      "exact", kvv_json_float(w->exact), "ulp", kvv_json_ulp(w->ulp)));
    }
    return o;
}

/* The whole report as one JSON document (NULL on OOM). */
static json_t *report_json(const kvv_numerics_report *rep, const kvv_report *meta)
{
    json_t *root = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:i, s:{s:s, s:i, s:I}, s:i, s:i, s:{s:I, s:I, s:s}, "
        "s:{s:I, s:I, s:I}, s:o}",
        "command", "numerics", "version", KVV_VERSION, "model", meta->model_path, "model_sha256",
        meta->model_sha256, "architecture", meta->architecture, "n_layer", rep->n_layer,
        "prompt", "source", meta->prompt_source, "n_tokens", rep->n_tokens, "seed",
        (json_int_t)meta->seed, "samples", rep->samples, "max_outputs", rep->max_outputs,
        "capture", "checked", (json_int_t)rep->capture_checked, "mismatch",
        (json_int_t)rep->capture_mismatch, "note", rep->capture_note, "oracle", "results",
        (json_int_t)rep->oracle.results, "escalations", (json_int_t)rep->oracle.escalations,
        "unresolved", (json_int_t)rep->oracle.unresolved, "seconds", kvv_json_number(rep->seconds));
    if (!root)
        return NULL;
    json_t *rows = json_array();
    for (int s = 0; s < rep->samples; s++)
        json_array_append_new(rows, json_integer(rep->rows[s]));
    json_object_set_new(root, "rows", rows);
    json_object_set_new(root, "softcaps", json_pack("{s:o, s:o}", "attention",
                                                    kvv_json_number(rep->attn_cap), "final",
                                                    kvv_json_number(rep->final_cap)));
    json_t *engines = json_array();
    for (int e = 0; e < rep->n_engines; e++) {
        const kvv_numerics_engine *en = &rep->engines[e];
        json_t *ops = json_object();
        for (int op = 0; op < KVV_OP_COUNT; op++) {
            json_t *jo = json_pack("{s:b, s:b, s:s}", "measured", en->measured[op], "used",
                                   rep->used[op], "where", en->where[op]);
            if (en->measured[op]) {
                json_object_set_new(jo, "total", cell_json(&en->total[op]));
                json_t *layers = json_array();
                for (int l = 0; l <= rep->n_layer; l++)
                    json_array_append_new(layers,
                                          cell_json(kvv_numerics_cell_at(rep, e, l, (kvv_op)op)));
                json_object_set_new(jo, "layers", layers);
            }
            json_object_set_new(ops, kvv_op_name((kvv_op)op), jo);
        }
        json_array_append_new(engines, json_pack("{s:s, s:o, s:o}", "name", en->name, "engine",
                                                 kvv_engine_desc_to_json(&en->desc), "ops", ops));
    }
    json_object_set_new(root, "engines", engines);
    json_t *math = json_array();
    for (int i = 0; i < rep->n_math; i++) {
        const kvv_numerics_math *m = &rep->math[i];
        json_array_append_new(
            math, json_pack("{s:s, s:s, s:s, s:s, s:I, s:o, s:o, s:I, s:o, s:o, s:o, s:o}",
                            "engine", m->engine, "fn", kvv_math_fn_name(m->fn), "range", m->range,
                            "where", m->where, "samples", (json_int_t)m->samples, "max_err",
                            kvv_json_number(m->max_err), "max_ulp", kvv_json_ulp(m->max_ulp), "not_rounded",
                            (json_int_t)m->n_not_rounded, "worst_x", kvv_json_float(m->worst_x),
                            "worst_y", kvv_json_float(m->worst_y), "got", kvv_json_float(m->worst_got),
                            "correctly_rounded", kvv_json_float(m->worst_exact)));
    }
    json_object_set_new(root, "math", math);
    return root;
}

/* --json and --html, both from the one document, and --junit from meta's
 * one result (verdict and control: kvv_numerics_verdict). @return 0, or 1
 * when a file could not be written (message printed). */
static int write_outputs(const kvv_output_cli *out, const kvv_numerics_report *rep,
                         const kvv_report *meta)
{
    kvv_error err = {0};
    if (out->junit_path && kvv_report_write_junit(meta, out->junit_path, &err)) {
        kvv_cli_fail(&err);
        return 1;
    }
    if (!out->json_path && !out->html_path)
        return 0;
    json_t *root = report_json(rep, meta);
    kvv_status st = root ? KVV_OK : kvv_error_set(&err, KVV_ERR_NOMEM, "numerics: out of memory");
    if (!st && meta->n_checks) { /* the verdict, as the JUnit states it */
        const kvv_check_result *r = &meta->checks[0];
        json_object_set_new(root, "verdict", json_string(kvv_verdict_name(r->verdict)));
        json_object_set_new(root, "key_figure", json_string(r->key_figure));
        json_object_set_new(root, "force_fail", json_boolean(r->details &&
                                                             json_is_true(json_object_get(
                                                                 r->details, "force_fail"))));
        json_t *ctl = json_array();
        for (int i = 0; i < r->n_controls; i++)
            json_array_append_new(ctl, json_pack("{s:s, s:b, s:s}", "name", r->controls[i].name,
                                                 "detected", r->controls[i].detected, "detail",
                                                 r->controls[i].detail));
        json_object_set_new(root, "controls", ctl);
    }
    if (!st && out->json_path)
        st = kvv_json_write_file(root, JSON_INDENT(1) | JSON_REAL_PRECISION(17), out->json_path,
                                 &err);
    if (!st && out->html_path)
        st = kvv_html_write(root, out->html_path, &err);
    json_decref(root);
    if (st) {
        kvv_cli_fail(&err);
        return 1;
    }
    return 0;
}

/* ------------------------------------------------------------ command */

/* numerics' share of the check commands' options: no cache type; --engine
 * may be "all" and --mode picks the cpu modes; the control is its planted
 * op set (--no-controls), --force-fail a flipped bit in the rebuild check. */
static void numerics_cli(kvv_check_cli *c)
{
    kvv_check_cli_init(c, "numerics");
    c->accepts = KVV_CHECK_OPT_PROMPT | KVV_CHECK_OPT_CONTROLS;
    c->exit_codes = "exit codes: 0 measured (the rebuilt inputs are the forward pass's and the\n"
                    "control was measured as 1 ULP), 1 the rebuilt inputs differ from the forward\n"
                    "pass or the control was not measured as 1 ULP, 2 bad input or usage, 77\n"
                    "unsupported model.\n";
    c->engine.accepts = KVV_ENGINE_OPT_ENGINE | KVV_ENGINE_OPT_MODE | KVV_ENGINE_OPT_THREADS |
                        KVV_ENGINE_OPT_ISA;
    c->engine.default_engine = c->engine.engine = "all";
    c->engine.allow_all = true;
    c->engine.engine_help = "ref, cpu or all (default all: ref, cpu fast, cpu invariant)";
    c->engine.mode_help = "cpu mode to measure: fast or invariant (default both)";
    c->out.accepts = KVV_OUT_JSON | KVV_OUT_JUNIT | KVV_OUT_HTML | KVV_OUT_QUIET |
                     KVV_OUT_PROGRESS;
    c->out.json_help = "the full report as JSON";
    c->out.quiet_help = "no per-layer table";
}

typedef struct {
    const kvv_check_cli *c;
    long samples, max_outputs, math_samples;
} num_opts;

static bool own_option(void *state, kvv_opts *o)
{
    num_opts *n = state;
    long v;
    if (kvv_opts_value(o, "--samples")) {
        if (o->value && kvv_opts_int(o, "--samples", o->value, 1, 1 << 16, &v))
            n->samples = v;
    } else if (kvv_opts_value(o, "--max-outputs")) {
        if (o->value && kvv_opts_int(o, "--max-outputs", o->value, 1, 1 << 24, &v))
            n->max_outputs = v;
    } else if (kvv_opts_value(o, "--math-samples")) {
        if (o->value && kvv_opts_int(o, "--math-samples", o->value, 0, 1 << 26, &v))
            n->math_samples = v;
    } else if (kvv_opts_flag(o, "--control")) { /* the old opt-in: the control is on now */
        fprintf(stderr, "kvverify numerics: note: --control is deprecated: the control runs by "
                        "default (--no-controls skips it)\n");
    } else {
        return false;
    }
    return true;
}

/* Is engine `name` measured under --engine `which` ("all": every engine
 * with an op set)? */
static bool measured(const char *which, const char *name)
{
    return strcmp(which, "all") == 0 || strcmp(which, name) == 0;
}

/* Does engine `name` run in mode m under --mode `mode` (NULL: each of its
 * modes)? An engine with one mode runs it whatever --mode says. */
static bool runs_in(const char *name, kvv_mode m, const char *mode)
{
    if (!kvv_engine_has_mode(name, m))
        return false;
    int n = 0;
    for (int k = 0; k < KVV_MODE_COUNT; k++)
        n += kvv_engine_has_mode(name, (kvv_mode)k);
    return !mode || n == 1 || strcmp(mode, kvv_mode_name(m)) == 0;
}

/* numerics measures the engines with an op set (ref, cpu) in their modes. */
static void own_finish(void *state, kvv_opts *o)
{
    const kvv_engine_cli *e = &((num_opts *)state)->c->engine;
    const char *name;
    bool engine_ok = false, mode_ok = !e->mode;
    kvv_mode m;
    char with[128] = "";
    size_t off = 0;
    for (int i = 0; (name = kvv_engine_registered(i)); i++)
        if (kvv_ops_available(name)) {
            if (off < sizeof with)
                off += (size_t)snprintf(with + off, sizeof with - off, "%s, ", name);
            if (!measured(e->engine, name))
                continue;
            engine_ok = true;
            mode_ok |= kvv_mode_from_name(e->mode, &m) && kvv_engine_has_mode(name, m);
        }
    if (!engine_ok)
        kvv_opts_error(o, "option --engine: '%s' has no op set (%sor all)", e->engine, with);
    else if (!mode_ok)
        kvv_opts_error(o, "option --mode: the engines measured have no mode '%s'", e->mode);
}

/* The control must come out as exactly 1 ULP on every value it measured. */
static bool control_ok(const kvv_numerics_engine *en)
{
    for (int op = 0; op < KVV_OP_COUNT; op++) {
        const kvv_oracle_hist *h = &en->total[op].hist;
        if (h->n == 0 || h->nan || h->bins[1] != h->n)
            return false;
    }
    return true;
}

/* The op sets to measure, in report order: the reference (unless --engine
 * cpu), the cpu engine's modes (unless --engine ref; one --mode only when
 * given), the planted control last (unless --no-controls). *ref is the reference's,
 * the capture set, always opened. @return 0 or an exit code. */
typedef struct {
    kvv_ops *list[4];
    int n;
    kvv_ops *ref, *control;
} op_sets;

static int open_op_sets(const kvv_model *m, const kvv_engine_opts *eo, const char *which,
                        const char *mode, bool control, op_sets *ops)
{
    kvv_error err = {0};
    memset(ops, 0, sizeof *ops);
    kvv_engine_opts reo = *eo;
    reo.isa = NULL; /* --isa is the engine's with kernel tables */
    if (kvv_ops_open_ref(m, &reo, &ops->ref, &err))
        return kvv_cli_fail(&err);
    const char *ref_name = kvv_engine_options(ops->ref->engine)->name;
    const char *name;
    for (int i = 0; (name = kvv_engine_registered(i)); i++) {
        if (!kvv_ops_available(name) || !measured(which, name))
            continue;
        /* room is kept for the control, last */
        for (int k = 0; k < KVV_MODE_COUNT && ops->n + 1 < (int)(sizeof ops->list /
                                                                 sizeof ops->list[0]); k++) {
            if (!runs_in(name, (kvv_mode)k, mode))
                continue;
            if (strcmp(name, ref_name) == 0) { /* the capture set, measured too */
                ops->list[ops->n++] = ops->ref;
                continue;
            }
            kvv_engine_opts oeo = *eo;
            oeo.name = name;
            oeo.mode = (kvv_mode)k;
            kvv_error oerr = {0};
            if (kvv_ops_open(m, &oeo, &ops->list[ops->n], &oerr) == KVV_OK)
                ops->n++;
            else if (strcmp(which, name) == 0)
                return kvv_cli_fail(&oerr);
            else
                printf("note: %s/%s skipped: %s\n", name, kvv_mode_name((kvv_mode)k), oerr.msg);
        }
    }
    if (control) {
        if (kvv_ops_open_oracle(ops->ref, 1, &ops->control, &err))
            return kvv_cli_fail(&err);
        ops->list[ops->n++] = ops->control;
    }
    return 0;
}

static void close_op_sets(op_sets *ops)
{
    kvv_ops_close(ops->control);
    for (int i = 0; i < ops->n; i++)
        if (ops->list[i] != ops->control && ops->list[i] != ops->ref)
            kvv_ops_close(ops->list[i]);
    kvv_ops_close(ops->ref);
}

/* The lines above the tables: model, prompt, rows, engines, the rebuild
 * check and the oracle's work. */
static void print_header(const kvv_check_cli *c, const kvv_check_run *run,
                         const kvv_numerics_report *rep)
{
    const kvv_hparams *hp = &run->model->hp;
    printf("kvverify numerics: ULP error of each engine's ops against the correctly rounded "
           "result (MPFR)\n");
    printf("model    %s (%s, %d layers, n_embd %d, n_ff %d, head_dim %d)\n", c->model_path,
           hp->arch_name, hp->n_layer, hp->n_embd, hp->n_ff, hp->head_dim);
    printf("prompt   %s, %d tokens in one batch (seed %llu)\n", run->report.prompt_source,
           run->n_prompt, (unsigned long long)c->prompt.seed);
    printf("rows     %d per layer:", rep->samples);
    for (int s = 0; s < rep->samples; s++)
        printf(" %d", rep->rows[s]);
    printf("; matmul: up to %d weight rows per matrix and row\n", rep->max_outputs);
    for (int e = 0; e < rep->n_engines; e++)
        printf("engine   %-14s %s\n", rep->engines[e].name, rep->engines[e].desc.kernels);
    printf("inputs   rebuilt with the reference's ops and checked against its forward pass: "
           "%ld values, %ld differ%s%s\n",
           rep->capture_checked, rep->capture_mismatch, rep->capture_mismatch ? ": " : "",
           rep->capture_note);
    printf("oracle   %llu results, %llu precision escalations, %llu unresolved; %.1f s\n",
           (unsigned long long)rep->oracle.results, (unsigned long long)rep->oracle.escalations,
           (unsigned long long)rep->oracle.unresolved, rep->seconds);
}

/* The verdict as one check result in rep (for --junit and the JSON): PASS
 * when the rebuilt inputs are the forward pass's and the control (when it
 * ran) measured exactly 1 ULP. @return the exit code it means. */
static int numerics_verdict(const kvv_numerics_report *nr, const op_sets *ops, bool force_fail,
                            kvv_report *rep)
{
    bool ok = !ops->control || control_ok(&nr->engines[ops->n - 1]);
    kvv_check_result *r = kvv_report_add(rep, "numerics");
    if (!r)
        return KVV_EXIT_BAD_INPUT;
    r->seconds = nr->seconds;
    rep->seconds = nr->seconds;
    json_object_set_new(r->details, "force_fail", json_boolean(force_fail));
    if (ops->control)
        kvv_check_add_control(r, "the correctly rounded results moved by 1 ULP", ok,
                              ok ? "measured as exactly 1 ULP on every value"
                                 : "NOT measured as exactly 1 ULP: the measurement is broken");
    if (nr->capture_mismatch) {
        kvv_check_set_verdict(r, KVV_VERDICT_FAIL, "%ld of %ld rebuilt inputs differ from the "
                              "forward pass", nr->capture_mismatch, nr->capture_checked);
        kvv_check_set_message(r, "first: %s", nr->capture_note);
    } else if (!ok) {
        kvv_check_set_verdict(r, KVV_VERDICT_FAIL, "control not measured as 1 ULP");
        kvv_check_set_message(r, "the planted +1 ULP op set was not measured as exactly 1 ULP");
    } else {
        kvv_check_set_verdict(r, KVV_VERDICT_PASS, "%ld rebuilt inputs bit-equal to the forward "
                              "pass; ops of %d engine%s measured", nr->capture_checked,
                              nr->n_engines - (ops->control != NULL),
                              nr->n_engines - (ops->control != NULL) == 1 ? "" : "s");
    }
    return r->verdict == KVV_VERDICT_PASS ? KVV_EXIT_PASS : KVV_EXIT_FAIL;
}

/* Measure ops over the prepared run, print, write --json / --html / --junit.
 * @return the exit code. */
static int measure(const kvv_check_cli *c, kvv_check_run *run, const num_opts *no,
                   op_sets *ops)
{
    kvv_numerics_opts nopt = kvv_numerics_opts_default();
    nopt.model = run->model;
    nopt.tokens = run->prompt;
    nopt.n_tokens = run->n_prompt;
    nopt.samples = (int)no->samples;
    nopt.seed = c->prompt.seed;
    nopt.max_outputs = (int)no->max_outputs;
    nopt.math_samples = (int)no->math_samples;
    nopt.force_fail = c->force_fail;
    nopt.progress = kvv_output_progress;
    nopt.progress_user = (void *)&c->out;
    kvv_numerics_report rep;
    kvv_error err = {0};
    if (kvv_numerics_run(&nopt, ops->ref, ops->list, ops->n, &rep, &err))
        return kvv_cli_fail(&err);
    const bool text = !c->out.stdout_taken; /* else stdout is the JSON's */
    if (text) {
        print_header(c, run, &rep);
        print_report(&rep, c->out.quiet);
    }
    int code = numerics_verdict(&rep, ops, c->force_fail, &run->report);
    if (ops->control) {
        bool ok = control_ok(&rep.engines[ops->n - 1]);
        if (text || !ok)
            fprintf(text ? stdout : stderr, "\ncontrol  planted +1 ULP %s\n",
                    ok ? "measured as exactly 1 ULP on every value: detected"
                       : "NOT measured as exactly 1 ULP: the measurement is broken");
    } else if (text) {
        printf("\ncontrol  off (--no-controls): the measurement itself is unproven\n");
    }
    if (rep.capture_mismatch)
        fprintf(text ? stdout : stderr, "%sFAIL: %ld of %ld rebuilt inputs differ from the "
                "forward pass; first: %s\n", text ? "" : "kvverify numerics: ",
                rep.capture_mismatch, rep.capture_checked, rep.capture_note);
    if (write_outputs(&c->out, &rep, &run->report))
        code = KVV_EXIT_BAD_INPUT;
    kvv_numerics_report_free(&rep);
    return code;
}

int kvv_cmd_numerics(int argc, char **argv)
{
    kvv_check_cli c;
    numerics_cli(&c);
    num_opts no = {.c = &c, .samples = 4, .max_outputs = 256, .math_samples = 20000};
    int code = kvv_check_cli_parse(&c, argc, argv, help,
                                   &(kvv_opt_group){own_option, own_finish, &no});
    if (code != KVV_OPTS_RUN)
        return code;
    const char *which = c.engine.engine, *mode = c.engine.mode, *isa = c.engine.isa;
    c.engine.engine = "ref"; /* prepare() only loads the model and builds the prompt */
    c.engine.mode = NULL;
    c.engine.isa = NULL;
    kvv_check_run run;
    if ((code = kvv_check_cli_prepare(&c, &run)))
        return code;
    kvv_engine_opts eo = kvv_engine_opts_default();
    eo.n_ctx = run.n_prompt;
    eo.n_threads = c.engine.n_threads > 0 ? c.engine.n_threads : 1;
    eo.cache_type = KVV_CACHE_F32;
    eo.isa = isa; /* the cpu engine's kernel table (NULL: its choice) */
    op_sets ops;
    code = open_op_sets(run.model, &eo, which, mode, c.controls, &ops);
    if (!code)
        code = measure(&c, &run, &no, &ops);
    close_op_sets(&ops);
    kvv_check_cli_close(&c, &run);
    return code;
}
