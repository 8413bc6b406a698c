/*
 * report.h — the reports room (verify/report/): the result model every
 * check fills (result.c) and the report writers, one file each (console.c,
 * json.c, junit.c, on the string buffer of sbuf.h). DESIGN.md §5 "Reports";
 * the JSON layout is written down in docs/report-schema.md (+
 * docs/report-schema.json).
 *
 * A check (verify/kv.h, patch.h, greedy.h, invariance.h, and later compare,
 * kvdirect, evict, ...) fills one kvv_check_result:
 *
 *   kvv_check_result r;
 *   kvv_check_result_init(&r, "kv");
 *   kvv_check_add_row(&r, 3, "K all", &stats);               // per-layer table
 *   kvv_check_note_mismatch(&r, &(kvv_mismatch){.tensor = "K", .layer = 3, ...});
 *   kvv_check_add_control(&r, "flipped bit in K[l=2,t=5]", true, "1 element differs");
 *   json_object_set_new(r.details, "chunk", json_integer(5)); // free-form figures
 *   kvv_check_set_verdict(&r, KVV_VERDICT_PASS, "0 of 61440 elements differ");
 *   ...
 *   kvv_check_result_free(&r);
 *
 * A run is a kvv_report: metadata (model, sha256, engine, version, seed) plus
 * an array of results it owns:
 *
 *   kvv_report rep;
 *   kvv_report_init(&rep, "model.gguf", seed);
 *   kvv_check_result *r = kvv_report_add(&rep, "kv");   // borrowed slot
 *   kvv_check_kv(&opts, r, &err);
 *   kvv_report_print_console(stdout, &rep, 0);
 *   kvv_report_write_json(&rep, "r.json", &err);
 *   kvv_report_write_junit(&rep, "r.xml", &err);
 *   int code = kvv_report_exit_code(&rep);
 *   kvv_report_free(&rep);
 *
 * Verdicts: PASS (ran; every comparison bit-equal; every control detected),
 * FAIL (ran; a difference was found, or a control was NOT detected),
 * ERROR (could not run to the end: engine error, out of memory), SKIPPED
 * (could not run here: the check needs a capability the engine lacks —
 * "unsupported by this engine", r->unsupported, the reason in r->message).
 * A check that ran and failed is a verdict, not a kvv_status error (STYLE
 * habit 3).
 *
 * Exit code of a run (DESIGN.md §6, issue 15), kvv_report_exit_code: a run
 * stopped by a signal (rep->interrupted) -> 130; else any FAIL -> 1; else
 * any ERROR -> 2; else no PASS at all (every check skipped, or no checks)
 * -> 77; else 0. So 0 means every check that could run on
 * this engine ran and passed; the skipped ones are listed as unsupported,
 * never counted as passed.
 */
#ifndef KVV_REPORT_H
#define KVV_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "engine/engine.h"
#include "common/error.h"
#include "common/json_num.h" /* kvv_json_number, kvv_json_ulp, kvv_json_float */
#include "verify/compare_stats.h"
#include "verify/report/sbuf.h"

typedef enum {
    KVV_VERDICT_PASS = 0,
    KVV_VERDICT_FAIL = 1,
    KVV_VERDICT_ERROR = 2,
    KVV_VERDICT_SKIPPED = 3
} kvv_verdict;

/* "pass", "fail", "error", "skipped". */
const char *kvv_verdict_name(kvv_verdict v);

/* One row of a per-layer table: the comparison of one tensor kind (what)
 * at one layer (layer = -1: not layer-specific, e.g. logits or a total). */
typedef struct {
    int layer;
    char what[48];        /* e.g. "K token-by-token", "V chunk=5", "logits" */
    kvv_cmp_stats st;
    char where[48];       /* the first mismatch in check terms ("t=5,h=1,i=7"), or "" */
} kvv_layer_row;

/* Where the first difference of a check was. Fields that do not apply are
 * -1 (ints) / "" (strings). */
typedef struct {
    char tensor[16];      /* "K", "V", "residual", "logits", "token" */
    char variant[64];     /* which recompute / run, e.g. "chunk=5", "step" */
    int layer;
    int token;            /* position in the sequence (or decode step) */
    int head;             /* KV head (or -1) */
    int index;            /* index inside the head (or inside the row) */
    float expected;       /* reference side (cache, run A, no-cache, baseline) */
    float actual;         /* side under test */
} kvv_mismatch;

/* Format "K[l=3,t=5,h=1,i=7] chunk=5: expected 0x3f800000 (1) got 0x3f800001
 * (1.00000012)" into buf. @return buf. */
char *kvv_mismatch_format(const kvv_mismatch *m, char *buf, size_t size);

/* One negative control: a planted difference and whether the check saw it. */
typedef struct {
    char name[160];       /* e.g. "flipped bit in K[l=2,t=5]" */
    bool detected;
    char detail[192];     /* how: "1 of 61440 elements differ, first K[l=2,t=5,h=0,i=0]" */
} kvv_control_result;

typedef struct {
    char name[32];             /* check name: "kv", "patch", ... */
    kvv_verdict verdict;       /* SKIPPED until set */
    bool unsupported;          /* SKIPPED because the engine lacks what the check needs */
    char key_figure[160];      /* the one line the summary table shows: cut at a word
                                  boundary, never inside a number, with "…" when the
                                  figure is longer (key_full then holds all of it) */
    char message[512];         /* error text (ERROR), failure reason (FAIL), or "", cut
                                  the same way (message_full) */
    char *key_full;            /* owned; the whole key figure when key_figure is cut, else NULL */
    char *message_full;        /* owned; the whole message when message is cut, else NULL */
    double seconds;            /* wall time of the check */
    char fault[16];            /* "" (the engine behaved; a FAIL is wrong bits), or how the
                                  engine under test broke: "crash" (the check's process
                                  died by a signal), "timeout" (killed at --timeout),
                                  "contract" (it broke the plugin contract: KVV_ERR_ENGINE).
                                  Verdict FAIL; JUnit <error type=FAULT>; summaries count
                                  faults apart from wrong bits (verify/isolate.h) */
    bool interrupted;          /* ERROR "interrupted": stopped by a signal before it ended
                                  (kvv_check_set_interrupted) */
    bool has_engine;
    kvv_engine_desc engine;    /* the engine the check measured */
    kvv_layer_row *rows;       /* n_rows (owned) */
    int n_rows, cap_rows;
    bool has_mismatch;
    kvv_mismatch mismatch;     /* the FIRST mismatch noted */
    kvv_control_result *controls; /* n_controls (owned) */
    int n_controls, cap_controls;
    json_t *details;           /* owned JSON object with free-form figures */
    bool unproven;             /* PASS of a run without its negative controls
                                  (--no-controls, kvv_report_mark_unproven): nothing
                                  shows the check could have failed, so every writer
                                  says KVV_UNPROVEN, never "passed" */
} kvv_check_result;

/* What every writer says of a PASS that ran without its controls. */
#define KVV_UNPROVEN "controls off: unproven"

/* Initialise r (SKIPPED, empty tables, details = {}). Never fails except on
 * OOM, where details is NULL and later json calls are no-ops. */
void kvv_check_result_init(kvv_check_result *r, const char *name);
void kvv_check_result_free(kvv_check_result *r); /* accepts NULL; r reusable after init */

/* Append a table row (stats copied). @return KVV_OK or KVV_ERR_NOMEM. */
kvv_status kvv_check_add_row(kvv_check_result *r, int layer, const char *what,
                             const kvv_cmp_stats *st);
/* Set the last row's `where` (printf-style): where its first mismatch is. */
void kvv_check_row_where(kvv_check_result *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Append a control result. @return KVV_OK or KVV_ERR_NOMEM. */
kvv_status kvv_check_add_control(kvv_check_result *r, const char *name, bool detected,
                                 const char *detail_fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Keep m if it is the first mismatch noted. */
void kvv_check_note_mismatch(kvv_check_result *r, const kvv_mismatch *m);
/* Set verdict and key figure (printf-style). */
void kvv_check_set_verdict(kvv_check_result *r, kvv_verdict v, const char *key_fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Set the message (printf-style). */
void kvv_check_set_message(kvv_check_result *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The whole key figure / message (what JSON and JUnit write; the console
 * shows the fitted ones). Borrowed from r. */
const char *kvv_check_key_figure(const kvv_check_result *r);
const char *kvv_check_message(const kvv_check_result *r);
/* Copy src into dst[size]; when it does not fit, cut at the last word
 * boundary (never inside a number or a hex pattern) and end with "…".
 * @return true when src was cut. */
bool kvv_text_fit(char *dst, size_t size, const char *src);
/* Mark ERROR with err's message (for a kvv_status failure inside a check);
 * KVV_ERR_ENGINE (the engine broke its contract) marks FAIL with fault
 * "contract" (kvv_check_set_fault); KVV_ERR_UNSUPPORTED marks SKIPPED, unsupported, key figure "unsupported by
 * this engine", the message saying what is missing. */
void kvv_check_set_error(kvv_check_result *r, const kvv_error *err);
/* Mark r FAIL with fault `fault` ("crash", "timeout", "contract"): key figure
 * "FAULT: detail" (e.g. "crash: SIGSEGV in forward, layer 3, position 17"),
 * message detail. */
void kvv_check_set_fault(kvv_check_result *r, const char *fault, const char *detail);
/* Mark r ERROR, key figure "interrupted", r->interrupted: the run was
 * stopped by a signal (SIGINT, SIGTERM) before r ended or started. */
void kvv_check_set_interrupted(kvv_check_result *r);
/* Number of controls not detected. */
int kvv_check_controls_missed(const kvv_check_result *r);
/* Record the engine description. */
void kvv_check_set_engine(kvv_check_result *r, const kvv_engine_desc *d);
/* The engine's identity beyond its name, mode and cache — version, device,
 * variant, flash attention, micro-batch — as "version ...; device ...;
 * ..." into buf ("" for the built-in engines, which report none).
 * @return buf. */
const char *kvv_engine_desc_identity(const kvv_engine_desc *d, char *buf, size_t size);
/* The console's engine line(s): "engine  NAME (MODE), cache T, N threads,
 * kernel table ISA, KERNELS" and, when there is one, the identity beneath. */
void kvv_engine_desc_print(FILE *f, const kvv_engine_desc *d);

/* ------------------------------------------------------------------ a run */

/* What a run exercised — part of every certificate (console header, JSON
 * "workload", JUnit properties): the prompt, the greedy steps, the
 * chunkings, the thread counts, the engine's kernel switches and the floor
 * the default never goes below (verify/audit.h). */
#define KVV_WORKLOAD_MAX 16
typedef struct {
    bool set;                  /* filled (a run without one prints none) */
    int n_prompt;              /* prompt tokens */
    int n_gen;                 /* greedy / decode steps */
    int kv_chunk;              /* kv's chunked recompute */
    int chunks[KVV_WORKLOAD_MAX]; /* invariance's chunk sizes */
    int n_chunks;
    int threads[KVV_WORKLOAD_MAX]; /* engine thread counts that ran (first: the engine's;
                                      then those invariance compared) */
    int n_threads;
    char switches[64];         /* the engine's kernel switches: "4", "2, 4", "none", "unknown" */
    int floor_prompt;          /* the floor: prompt tokens, steps */
    int floor_gen;
    bool quick;                /* --quick: sized by the time budget alone */
    bool below_floor;          /* the prompt or the steps are below the floor */
    int batches[KVV_WORKLOAD_MAX]; /* latency: the batch sizes measured (n_batches 0: none) */
    int n_batches;
    int repeats;               /* latency: repeats per measurement (0: none) */
    char requests[256];        /* batch: the requests, lengths and steps it ran ("" none) */
} kvv_workload;

/* Set w->below_floor: a prompt below floor_prompt, or steps (when the run
 * has any, n_gen > 0) below floor_gen. Call after trimming what a command
 * does not run (n_gen = 0 for a run without decoding). */
void kvv_workload_check_floor(kvv_workload *w);

/* "prompt 8 tokens, 32 greedy steps, kv chunk 5, chunks 1,2,3,4,7, threads
 * 1,2; kernel switches at 4 tokens; floor prompt 8, 32 steps" (and "QUICK" /
 * "below the floor" when so) into buf. @return buf. */
char *kvv_workload_format(const kvv_workload *w, char *buf, size_t size);
/* The workload back from its JSON object (kvv_workload_to_json), for the
 * writers that draw from a saved document (the HTML page, `kvverify
 * report`): w->set is false when j is not an object; fields it lacks are 0.
 * The same w formats to the same line as the run's own. */
void kvv_workload_from_json(const json_t *j, kvv_workload *w);

typedef struct {
    char version[16];          /* KVV_REPORT_VERSION of the writer ("0.1.0") */
    char model_path[1024];
    char model_sha256[65];     /* lowercase hex, "" if not computed */
    char architecture[32];     /* "" if unknown */
    uint64_t seed;
    bool has_engine;
    kvv_engine_desc engine;    /* the engine under test, as requested / first opened */
    char vs[64];               /* compare: engine A, the reference side ("ref (exact)"); "" */
    char prompt_source[32];    /* "random", "tokens", "text" */
    int n_prompt;              /* prompt length */
    kvv_workload workload;     /* what the run exercised (set by the command) */
    char started[32];          /* UTC, ISO 8601 */
    double seconds;            /* total wall time */
    bool interrupted;          /* stopped by a signal: checks may be missing or
                                  "interrupted"; the exit code is 130 */
    kvv_check_result *checks;  /* n_checks (owned) */
    int n_checks, cap_checks;
    bool controls_off;         /* --no-controls: the run planted none (JSON "controls") */
} kvv_report;

/* Version string written into reports (same as `kvverify --version`). */
#define KVV_REPORT_VERSION "0.1.0"
/* Version of the JSON layout (docs/report-schema.md). */
#define KVV_REPORT_SCHEMA 1

void kvv_report_init(kvv_report *rep, const char *model_path, uint64_t seed);
void kvv_report_free(kvv_report *rep); /* accepts NULL */
/* Append an initialised result named `name`; borrowed pointer valid until
 * the next kvv_report_add or kvv_report_free. NULL on OOM. */
kvv_check_result *kvv_report_add(kvv_report *rep, const char *name);
/* Exit code per the rule at the top of this file. A run without its
 * controls (rep->controls_off) keeps that rule: 0 when no check failed —
 * every requested check ran and its comparison passed; the controls were
 * not requested — but every writer calls it unproven (docs/checks.md). */
int kvv_report_exit_code(const kvv_report *rep);
/* Mark each PASS of a run without controls unproven (r->unproven); call
 * after the checks ran, before writing. @return how many were marked. */
int kvv_report_mark_unproven(kvv_report *rep);
/* The run's verdict word: "pass", "fail", "error", "skipped", or
 * "unproven" for exit code 0 with a check marked unproven. Static. */
const char *kvv_report_verdict_name(const kvv_report *rep);
/* Faults of rep's checks: crashes, timeouts and contract breaks (any may be
 * NULL). @return their sum. */
int kvv_report_count_faults(const kvv_report *rep, int *crash, int *timeout, int *contract);


/* ------------------------------------------------------------ the writers
 *
 * One file each, beside this header: console.c, json.c, junit.c, and the
 * HTML page (html.c with its figures in html_*.c, plots by svg.h), all
 * building text with sbuf.h; suite results (verify/suite/) are written
 * with the same pieces. */

/* Console: the summary table (check, verdict, key figure, time), then one
 * line per control and per failure. flags: KVV_CONSOLE_* bits. */
enum {
    KVV_CONSOLE_LAYERS = 1u << 0,   /* also print every check's per-layer rows */
    KVV_CONSOLE_QUIET = 1u << 1,    /* only the summary table and failures */
    KVV_CONSOLE_NO_HEADER = 1u << 2, /* the header was printed already (kvv_report_print_header) */
    KVV_CONSOLE_ENGINE = 1u << 3     /* with NO_HEADER: the engine line again, as the run
                                        described it (a plugin's version, device) */
};
void kvv_report_print_console(FILE *f, const kvv_report *rep, unsigned flags);
/* The header alone: model, engine (when known), prompt. */
void kvv_report_print_header(FILE *f, const kvv_report *rep);
/* Per-layer table of one check (what the single-check commands print). */
void kvv_check_print_rows(FILE *f, const kvv_check_result *r);
/* Controls and first mismatch lines of one check. */
void kvv_check_print_notes(FILE *f, const kvv_check_result *r);

/* JSON (docs/report-schema.md): a new reference the caller json_decref's;
 * NULL on OOM. */
json_t *kvv_report_to_json(const kvv_report *rep);
json_t *kvv_check_to_json(const kvv_check_result *r);
json_t *kvv_engine_desc_to_json(const kvv_engine_desc *d);
json_t *kvv_cmp_stats_to_json(const kvv_cmp_stats *s);
json_t *kvv_mismatch_to_json(const kvv_mismatch *m);
json_t *kvv_workload_to_json(const kvv_workload *w);
/* Write the JSON report atomically (temp file + rename; an existing file is
 * untouched on failure). KVV_ERR_IO naming the file. */
kvv_status kvv_report_write_json(const kvv_report *rep, const char *path, kvv_error *err);
/* Any JSON document to path, the one way every command writes a JSON file:
 * json_dumps(j, flags), a final newline, written atomically. j is borrowed.
 * KVV_ERR_NOMEM, or KVV_ERR_IO naming the file. */
kvv_status kvv_json_write_file(const json_t *j, size_t flags, const char *path, kvv_error *err);

/* HTML: one self-contained page of any kvverify JSON document — a check
 * report (kvv_report_to_json), a suite's results, a numerics report —
 * drawn from that document alone (the page shows the numbers the JSON
 * holds; nothing is computed for it): a header, a summary table, and per
 * check its figures (inline SVG with axes, units, a title saying what
 * passes, every point's numbers on hover), controls and tables. Inline
 * style, no script, no font or file fetched. Written atomically like the
 * JSON; path "-" writes to stdout. KVV_ERR_USAGE when doc is none of the
 * kinds (kvv_html_doc_kind), KVV_ERR_NOMEM, or KVV_ERR_IO naming the file. */
kvv_status kvv_html_write(const json_t *doc, const char *path, kvv_error *err);
/* "report", "suite", "numerics", or NULL for anything else. */
const char *kvv_html_doc_kind(const json_t *doc);
/* Several documents of one kind (nights of the same audit or suite):
 * labels[i] names document i (e.g. its file). One page: a trend per check
 * over the nights (ordered by their "started" time, else as given), then
 * the latest document in full. n >= 2; KVV_ERR_USAGE when a document is
 * not a report or suite, or the kinds differ (naming labels[i]). */
kvv_status kvv_html_write_trend(const json_t *const *docs, const char *const *labels, int n,
                                const char *path, kvv_error *err);

/* JUnit XML: one <testsuite>, one <testcase> per check; FAIL -> <failure>
 * whose message is the first mismatch (or the reason), ERROR -> <error>,
 * SKIPPED -> <skipped/>. Written atomically like the JSON. */
kvv_status kvv_report_write_junit(const kvv_report *rep, const char *path, kvv_error *err);

/* The JUnit document in pieces, for writers of other runs (suite): begin,
 * optional properties, one testcase per result, end; then
 * kvv_sbuf_write_file. Every testcase is written by kvv_junit_testcase, so
 * a check's failure reads the same in every JUnit file kvverify writes. */
typedef struct {
    int tests, failures, errors, skipped;
    double seconds;
} kvv_junit_totals;

/* Count r into t (its verdict; not the seconds). */
void kvv_junit_count(kvv_junit_totals *t, const kvv_check_result *r);
/* <?xml?>, <testsuites> and the opening <testsuite name=...> with t's
 * counts; timestamp (ISO 8601) may be NULL. */
void kvv_junit_begin(kvv_sbuf *b, const char *suite_name, const char *timestamp,
                     const kvv_junit_totals *t);
/* <properties> from n (name, value) pairs: kv[2*i], kv[2*i+1]. */
void kvv_junit_properties(kvv_sbuf *b, const char *const *kv, int n);
/* One <testcase classname= name=r->name>: <failure>/<error>/<skipped> by
 * verdict (message: the first mismatch, else the message, else the key
 * figure), then <system-out> with `context` (a line saying where the
 * testcase ran, e.g. the suite case's model and engine; NULL = none), the
 * key figure and every control. */
void kvv_junit_testcase(kvv_sbuf *b, const char *classname, const kvv_check_result *r,
                        const char *context);
/* </testsuite></testsuites>. */
void kvv_junit_end(kvv_sbuf *b);

#endif
