/* console.c — the human-readable report (see report.h). */
#include "verify/report/report.h"

#include <ctype.h>
#include <string.h>

static void upper(char *dst, size_t size, const char *s)
{
    size_t i = 0;
    for (; s[i] && i + 1 < size; i++)
        dst[i] = (char)toupper((unsigned char)s[i]);
    dst[i] = 0;
}

void kvv_engine_desc_print(FILE *f, const kvv_engine_desc *d)
{
    char id[400];
    fprintf(f, "engine  %s (%s), cache %s, %d thread%s%s%s%s%s\n", d->name, d->mode,
            d->cache_type, d->n_threads, d->n_threads == 1 ? "" : "s",
            d->isa[0] ? ", kernel table " : "", d->isa, d->kernels[0] ? ", " : "", d->kernels);
    if (kvv_engine_desc_identity(d, id, sizeof id)[0])
        fprintf(f, "        %s\n", id);
}

void kvv_check_print_rows(FILE *f, const kvv_check_result *r)
{
    if (!r->n_rows)
        return;
    fprintf(f, "  %-5s %-30s %10s %10s %9s %12s %12s %12s  %s\n", "layer", "compared", "elements",
            "differing", "NaN/inf", "max ULP", "NMSE", "max |d|", "first mismatch");
    for (int i = 0; i < r->n_rows; i++) {
        const kvv_layer_row *w = &r->rows[i];
        char layer[16], ulp[24], nmse[24], mabs[24], bad[24];
        if (w->layer >= 0)
            snprintf(layer, sizeof layer, "%d", w->layer);
        else
            snprintf(layer, sizeof layer, "-");
        kvv_ulp_text(w->st.max_ulp, ulp, sizeof ulp);
        kvv_figure_text(kvv_cmp_nmse(&w->st), nmse, sizeof nmse);
        kvv_figure_text(kvv_cmp_max_abs(&w->st), mabs, sizeof mabs);
        snprintf(bad, sizeof bad, "%llu", (unsigned long long)(w->st.n_nan + w->st.n_inf));
        char first[96] = "";
        if (w->st.first >= 0)
            snprintf(first, sizeof first, "%s 0x%08x/0x%08x", w->where[0] ? w->where : "@",
                     (unsigned)kvv_f32_bits(w->st.first_ref),
                     (unsigned)kvv_f32_bits(w->st.first_test));
        fprintf(f, "  %-5s %-30s %10llu %10llu %9s %12s %12s %12s%s%s\n", layer, w->what,
                (unsigned long long)w->st.n, (unsigned long long)w->st.n_diff, bad, ulp, nmse,
                mabs, first[0] ? "  " : "", first);
    }
}

void kvv_check_print_notes(FILE *f, const kvv_check_result *r)
{
    for (int i = 0; i < r->n_controls; i++) {
        const kvv_control_result *c = &r->controls[i];
        fprintf(f, "  %s control: %s — %s (%s)\n", r->name, c->name,
                c->detected ? "detected" : "NOT DETECTED", c->detail);
    }
    if (r->has_mismatch) {
        char buf[256];
        fprintf(f, "  %s first mismatch: %s\n", r->name,
                kvv_mismatch_format(&r->mismatch, buf, sizeof buf));
    }
    if (r->message[0] && r->verdict != KVV_VERDICT_PASS)
        fprintf(f, "  %s %s: %s\n", r->name, kvv_verdict_name(r->verdict), r->message);
}

void kvv_report_print_header(FILE *f, const kvv_report *rep)
{
    const char *base = strrchr(rep->model_path, '/');
    fprintf(f, "model   %s", base ? base + 1 : rep->model_path);
    if (rep->architecture[0])
        fprintf(f, " (%s)", rep->architecture);
    if (rep->model_sha256[0])
        fprintf(f, "  sha256 %.16s…", rep->model_sha256);
    fprintf(f, "\n");
    if (rep->has_engine)
        kvv_engine_desc_print(f, &rep->engine);
    if (rep->vs[0])
        fprintf(f, "vs      %s = engine A, the reference side; the engine above is B, the "
                   "engine under test\n", rep->vs);
    if (rep->n_prompt)
        fprintf(f, "prompt  %s, %d tokens, seed %llu\n", rep->prompt_source, rep->n_prompt,
                (unsigned long long)rep->seed);
    if (rep->workload.set) {
        char w[512];
        fprintf(f, "workload %s\n", kvv_workload_format(&rep->workload, w, sizeof w));
    }
}

void kvv_report_print_console(FILE *f, const kvv_report *rep, unsigned flags)
{
    bool quiet = flags & KVV_CONSOLE_QUIET;
    if (!quiet && !(flags & KVV_CONSOLE_NO_HEADER)) {
        kvv_report_print_header(f, rep);
        fprintf(f, "\n");
    } else if (!quiet && (flags & KVV_CONSOLE_ENGINE) && rep->has_engine) {
        kvv_engine_desc_print(f, &rep->engine);
        fprintf(f, "\n");
    } else if (quiet && rep->workload.set) { /* the certificate's sizes, even quiet */
        char w[512];
        fprintf(f, "workload %s\n", kvv_workload_format(&rep->workload, w, sizeof w));
    }
    int nw = 12; /* the name column: as wide as the longest name (serve-concurrent) */
    for (int i = 0; i < rep->n_checks; i++)
        nw = (int)strlen(rep->checks[i].name) > nw ? (int)strlen(rep->checks[i].name) : nw;
    fprintf(f, "%-*s %-8s %9s  %s\n", nw, "check", "verdict", "time", "key figure");
    for (int i = 0; i < rep->n_checks; i++) {
        const kvv_check_result *r = &rep->checks[i];
        char v[16];
        upper(v, sizeof v, r->unproven ? "unproven" : kvv_verdict_name(r->verdict));
        fprintf(f, "%-*s %-8s %8.2fs  %s\n", nw, r->name, v, r->seconds, r->key_figure);
    }
    int code = kvv_report_exit_code(rep), n_skipped = 0, n_stopped = 0, n_unproven = 0;
    for (int i = 0; i < rep->n_checks; i++) {
        n_skipped += rep->checks[i].verdict == KVV_VERDICT_SKIPPED;
        n_stopped += rep->checks[i].interrupted;
        n_unproven += rep->checks[i].unproven;
    }
    if (rep->interrupted) /* whatever the finished checks say, the run is not whole */
        fprintf(f, "INTERRUPTED by a signal after %.2fs: %d of %d checks finished\n",
                rep->seconds, rep->n_checks - n_stopped, rep->n_checks);
    else if (code == KVV_EXIT_PASS && n_unproven) /* never "passed": nothing shows it could fail */
        fprintf(f, "no check failed; " KVV_UNPROVEN " (%d check%s ran without %s negative "
                "controls: none is shown able to fail%s) in %.2fs\n", n_unproven,
                n_unproven == 1 ? "" : "s", n_unproven == 1 ? "its" : "their",
                n_skipped ? "; some unsupported by this engine" : "", rep->seconds);
    else if (code == KVV_EXIT_PASS && n_skipped)
        fprintf(f, "every check that could run passed (%d unsupported by this engine) in %.2fs\n",
                n_skipped, rep->seconds);
    else
        fprintf(f, "%s in %.2fs\n",
                code == KVV_EXIT_PASS   ? "all checks passed"
                : code == KVV_EXIT_FAIL ? (rep->controls_off ? "FAILED (controls off)" : "FAILED")
                : code == KVV_EXIT_NOTHING ? "nothing could be checked"
                                           : "ERROR: a check could not run",
                rep->seconds);
    int crash, timeout, contract;
    if (kvv_report_count_faults(rep, &crash, &timeout, &contract)) {
        int wrong = 0; /* wrong bits: failures the engine ran to the end */
        for (int i = 0; i < rep->n_checks; i++)
            wrong += rep->checks[i].verdict == KVV_VERDICT_FAIL && !rep->checks[i].fault[0];
        fprintf(f, "engine faults: %d crashed, %d timed out, %d broke the contract; "
                "%d failed on wrong bits\n", crash, timeout, contract, wrong);
    }
    bool any = false;
    for (int i = 0; i < rep->n_checks; i++) {
        const kvv_check_result *r = &rep->checks[i];
        bool show = !quiet || r->verdict != KVV_VERDICT_PASS;
        if (!show || (!r->n_controls && !r->has_mismatch && !r->message[0]))
            continue;
        if (quiet) {
            /* failures only: skip detected controls */
            char buf[256];
            if (r->has_mismatch)
                fprintf(f, "  %s first mismatch: %s\n", r->name,
                        kvv_mismatch_format(&r->mismatch, buf, sizeof buf));
            for (int c = 0; c < r->n_controls; c++)
                if (!r->controls[c].detected)
                    fprintf(f, "  %s control: %s — NOT DETECTED (%s)\n", r->name,
                            r->controls[c].name, r->controls[c].detail);
            if (r->message[0])
                fprintf(f, "  %s %s: %s\n", r->name, kvv_verdict_name(r->verdict), r->message);
            continue;
        }
        if (!any)
            fprintf(f, "\n");
        any = true;
        kvv_check_print_notes(f, r);
    }
    if (flags & KVV_CONSOLE_LAYERS) {
        for (int i = 0; i < rep->n_checks; i++) {
            if (!rep->checks[i].n_rows)
                continue;
            fprintf(f, "\n%s:\n", rep->checks[i].name);
            kvv_check_print_rows(f, &rep->checks[i]);
        }
    }
}
