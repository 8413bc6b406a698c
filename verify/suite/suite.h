/*
 * suite.h — nightly suites: a manifest of cases (model × engine × mode ×
 * cache type × checks or golden vector), run in deterministic shards so a
 * CI matrix or a Slurm array spreads one night's run over many machines.
 * Manifest syntax and examples: docs/nightly.md. Three files: manifest.c
 * (parse, shards), run.c (run a shard), write.c (JUnit and JSON, with the
 * report room's writers, verify/report/report.h).
 *
 * Text manifest, one case per line ('#' starts a comment, blank lines skip):
 *
 *   NAME key=value key=value ...
 *
 *   model=PATH       GGUF model (required); relative paths are relative to
 *                    the manifest's folder
 *   engine=NAME      ref (default), cpu, llama.cpp, an installed plugin's
 *                    name, or plugin:PATH.so (any length; a relative PATH is
 *                    relative to the manifest's folder)
 *   mode=MODE        exact / invariant / fast (default: exact for ref,
 *                    invariant otherwise)
 *   threads=N        engine threads (default 1)
 *   cache=T          f32 (default), f16, bf16
 *   device=D         where a plugin engine runs (llama.cpp: cpu, vulkan, cuda)
 *   ubatch=N         a plugin engine's micro-batch size (default: its own)
 *   isa=NAME         the cpu engine's kernel table: generic, avx2, avx512 or
 *                    auto (default: the widest the machine runs); only with
 *                    engine=cpu. A table the machine cannot run is an ERROR
 *                    outcome of the case (engine/cpu/cpu_isa.h)
 *   engine-opt=K=V   a plugin engine's option (repeatable, up to
 *                    KVV_SUITE_MAX_EOPTS, passed in order; JSON: a string or
 *                    an array of strings)
 *   checks=LIST      comma list of the audit's checks (verify/audit.h: kv,
 *                    patch, greedy, invariance, kvdirect, compare)
 *   vector=PATH      a .kvv golden vector to check the engine against
 *   tokens=N         prompt length for checks (random ids; default the audit's
 *                    floor for the case's engine: at least 16 and twice its
 *                    largest kernel switch, verify/audit.h)
 *   seed=S           prompt seed (default 1)
 *   n=N              greedy/kvdirect decode steps (default the floor,
 *                    KVV_AUDIT_MIN_STEPS = 32; 16 with --quick, which says so)
 *   optional=yes     a missing model file skips the case instead of an error
 *   control=C        a negative control case: `force-fail` (the checks plant
 *                    their control in the real comparison), `weight` or
 *                    `resid:L:P` (the vector check runs with a perturbed weight
 *                    / residual bit, as vectors check --perturb). Its testcases
 *                    PASS when the planted difference is detected (the check
 *                    fails, the vector diverges) and FAIL when it is not.
 *
 * A case needs checks=, vector= or both. The JSON form is
 * {"cases": [{"name": "...", "model": "...", "checks": ["kv", "patch"], ...}]}
 * with the same keys (numbers may be JSON integers, checks and engine-opt a
 * string or an array).
 *
 * Sharding: --shard I/N runs the cases whose 0-based manifest index i has
 * i % N == I - 1; the N shards together run every case exactly once.
 *
 *   kvv_suite *s;
 *   if (kvv_suite_load("nightly.txt", &s, &err)) ...
 *   kvv_suite_results res;
 *   kvv_suite_run(s, 1, 4, &res, &err);     // shard 1 of 4
 *   kvv_suite_write_junit(&res, "shard1.xml", &err);
 *   kvv_suite_write_json(&res, "shard1.json", &err);
 *   int code = kvv_suite_exit_code(&res);
 *   kvv_suite_results_free(&res);
 *   kvv_suite_free(s);
 */
#ifndef KVV_SUITE_H
#define KVV_SUITE_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "engine/engine.h"
#include "common/error.h"
#include "verify/check.h"
#include "verify/report/report.h"

#define KVV_SUITE_MAX_EOPTS 16

typedef struct {
    char name[64];           /* unique in the manifest */
    int line;                /* manifest line (text) or array index + 1 (JSON) */
    char model[1024];        /* resolved path */
    char engine[1040];       /* a name, or plugin:PATH (resolved) */
    char mode[16];           /* "" = engine default */
    int threads;
    char cache[8];
    char device[64];         /* "" = the engine's default */
    int n_ubatch;            /* 0 = the engine's */
    char isa[16];            /* cpu kernel table; "" = the engine's choice */
    const char *engine_opts[KVV_SUITE_MAX_EOPTS]; /* "KEY=VALUE", owned by the suite */
    int n_engine_opts;
    unsigned checks;         /* bit i: entry i of the audit's check table (kvv_suite_check_bit) */
    char vector[1024];       /* resolved path, "" = none */
    int n_tokens;            /* 0 = the floor (see tokens= above) */
    uint64_t seed;
    int n_gen;               /* 0 = the floor (see n= above) */
    bool optional;
    bool force_fail;         /* control=force-fail */
    unsigned control;        /* control=weight: KVV_CTL_PERTURB_WEIGHT */
    int perturb_layer;       /* control=resid:L:P, else -1 */
    int perturb_pos;
} kvv_suite_case;

/* Most cases a manifest may hold: a case takes about 2 KiB in memory (its
 * two paths), so this bounds what a manifest can make the parser allocate
 * (about 140 MiB) whatever its size; nightly suites hold tens to hundreds. */
#define KVV_SUITE_MAX_CASES 65536

typedef struct {
    char path[1024];
    kvv_suite_case *cases;   /* n_cases, in manifest order (owned) */
    int n_cases;
} kvv_suite;

/* Parse a manifest (text or JSON, told apart by a leading '{'). Errors are
 * KVV_ERR_FORMAT "FILE: line N: key K: reason" (KVV_ERR_IO if unreadable).
 * On success *out is owned by the caller (kvv_suite_free). */
kvv_status kvv_suite_load(const char *path, kvv_suite **out, kvv_error *err);
/* The same from a buffer; base_dir resolves relative paths (NULL = "."). */
kvv_status kvv_suite_parse(const char *text, size_t len, const char *name, const char *base_dir,
                           kvv_suite **out, kvv_error *err);
void kvv_suite_free(kvv_suite *s); /* accepts NULL */

/* The bit of kvv_suite_case.checks for the check called name (an entry of
 * the audit's table, verify/audit.h); 0 if there is no such check. */
unsigned kvv_suite_check_bit(const char *name);

/* The engine options a case asks for (mode defaulted per engine); the
 * strings point into the case (valid while the suite is). */
kvv_engine_opts kvv_suite_case_engine(const kvv_suite_case *c);

/* Is 0-based case index i in shard shard_i of shard_n (1 <= shard_i <= shard_n)? */
bool kvv_suite_in_shard(int i, int shard_i, int shard_n);
/* Parse "I/N" (1 <= I <= N <= 100000). @return false if malformed. */
bool kvv_suite_parse_shard(const char *s, int *shard_i, int *shard_n);

/* One testcase of a run: a check (or "vector") of one case. */
typedef struct {
    int case_index;          /* index into the suite's cases */
    kvv_check_result r;      /* verdict, figures, first mismatch (owned) */
    kvv_workload workload;   /* what the case's checks ran (set false for a vector) */
    json_t *prior;           /* resumed (--resume): the result object as the earlier
                                report wrote it, written again verbatim (owned); NULL
                                for a result of this run */
} kvv_suite_outcome;

struct kvv_suite_results {
    const kvv_suite *suite;  /* borrowed */
    int shard_i, shard_n;
    int n_cases_run;
    kvv_suite_outcome *out;  /* n_out (owned) */
    int n_out, cap_out;
    char started[32];        /* UTC start, ISO 8601 (orders nights in a trend) */
    double seconds;
    int n_resumed;           /* cases taken from the --resume report */
    bool interrupted;        /* stopped by ro->stop before the shard's end */
};
typedef struct kvv_suite_results kvv_suite_results;

/* A line per testcase on log (NULL = silent); the checks' own progress
 * through progress (optional; verify/check.h). */
struct kvv_suite_results;
typedef struct {
    FILE *log;
    kvv_progress_fn progress;
    void *progress_user;
    bool quick;              /* --quick: default sizes below the floor (16 tokens, 16
                              * steps), and every workload says QUICK */
    int isolate;             /* kvv_isolate_mode for every check (verify/isolate.h);
                                0 = off */
    double timeout;          /* isolated checks' limit (0: kvv_isolate_default_timeout) */
    volatile sig_atomic_t *stop; /* nonzero: stop after (or, isolated, during) the
                                    current check; the unfinished case's outcomes are
                                    dropped and kvv_suite_run returns KVV_OK with
                                    res->interrupted set */
    /* called after each finished case (e.g. to rewrite the reports, so a
     * killed run keeps what it finished); optional */
    void (*case_done)(void *user, const struct kvv_suite_results *res);
    void *case_done_user;
    const char *resume;      /* --resume: a JSON report of an earlier run of this suite
                                (kvv_suite_write_json): its results are kept and the
                                cases it holds are not run again; NULL = none */
} kvv_suite_run_opts;


/* Run the shard's cases. A case that cannot run (missing non-optional
 * model, engine error, corrupt vector) gives ERROR outcomes, not a failed
 * call: the status is KVV_OK unless memory ran out.
 * @return KVV_OK or KVV_ERR_NOMEM. */
kvv_status kvv_suite_run(const kvv_suite *s, int shard_i, int shard_n,
                         const kvv_suite_run_opts *ro, kvv_suite_results *res, kvv_error *err);
void kvv_suite_results_free(kvv_suite_results *res); /* accepts NULL */

/* --resume (resume.c): read the JSON report at path, written by
 * kvv_suite_write_json for suite s, into res: each result whose "case"
 * names a case of s becomes an outcome (prior = the object, r rebuilt from
 * it for JUnit and the console: verdict, figures, message, fault, seconds,
 * controls, details) and done[case index] is set. KVV_ERR_IO (unreadable)
 * or KVV_ERR_FORMAT naming the file and the field. */
kvv_status kvv_suite_resume_load(const kvv_suite *s, const char *path, kvv_suite_results *res,
                                 bool *done, kvv_error *err);
/* A check result from its JSON object (kvv_check_to_json's layout). r is
 * initialised here. KVV_ERR_FORMAT naming the field. */
kvv_status kvv_check_result_from_json(const json_t *j, kvv_check_result *r, kvv_error *err);

/* 130 (KVV_EXIT_INTERRUPTED) if res->interrupted; else 1 if any FAIL;
 * else 2 if any ERROR; else 77 if nothing passed (empty shard, all
 * skipped); else 0. The JSON's "exit_code" is this number. */
int kvv_suite_exit_code(const kvv_suite_results *res);

/* JUnit XML: <testsuites><testsuite name="kvverify suite MANIFEST shard I/N">
 * one <testcase classname="kvverify.suite.CASE" name="CHECK"> per outcome,
 * written by the report room's kvv_junit_testcase (its <system-out> starts
 * with the case's model, engine, mode, cache, threads and vector). Shards'
 * files merge by concatenating their <testsuite> elements
 * (docs/nightly.md). Written atomically. */
kvv_status kvv_suite_write_junit(const kvv_suite_results *res, const char *path, kvv_error *err);
/* JSON: {"manifest", "shard", "cases_run", "seconds", "results": [...],
 * "summary": {...}, "exit_code"}; each result is kvv_check_to_json's object
 * (new reference, NULL on OOM). */
json_t *kvv_suite_results_to_json(const kvv_suite_results *res);
/* That JSON written to path (kvv_json_write_file: sorted keys, atomic). */
kvv_status kvv_suite_write_json(const kvv_suite_results *res, const char *path, kvv_error *err);

#endif
