/* suite.c — manifest parsing, sharded runs and their JUnit/JSON output.
 * See suite.h; the manifest syntax is documented in docs/nightly.md. */
#include "verify/suite/suite.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "model/arch.h"
#include "vectors/kvv_vectors.h"
#include "verify/check.h"
#include "verify/greedy.h"
#include "verify/invariance.h"
#include "verify/kv.h"
#include "verify/kvdirect.h"
#include "verify/patch.h"

/* The checks a case may name, in the order they run. */
static const struct {
    const char *name;
    unsigned bit;
    kvv_check_fn run;
} check_table[] = {
    {"kv", KVV_SUITE_KV, kvv_check_kv},
    {"patch", KVV_SUITE_PATCH, kvv_check_patch},
    {"greedy", KVV_SUITE_GREEDY, kvv_check_greedy},
    {"invariance", KVV_SUITE_INVARIANCE, kvv_check_invariance},
    {"kvdirect", KVV_SUITE_KVDIRECT, kvv_check_kvdirect},
};
#define N_CHECKS (sizeof check_table / sizeof check_table[0])

/* ============================================================ parsing */

void kvv_suite_free(kvv_suite *s)
{
    if (!s)
        return;
    free(s->cases);
    free(s);
}

bool kvv_suite_in_shard(int i, int shard_i, int shard_n)
{
    return shard_n >= 1 && shard_i >= 1 && shard_i <= shard_n && i % shard_n == shard_i - 1;
}

bool kvv_suite_parse_shard(const char *s, int *shard_i, int *shard_n)
{
    int a, b, k = 0;
    if (!s || sscanf(s, "%d/%d%n", &a, &b, &k) != 2 || s[k] != '\0')
        return false;
    if (b < 1 || b > 100000 || a < 1 || a > b)
        return false;
    *shard_i = a;
    *shard_n = b;
    return true;
}

typedef struct {
    const char *file;
    const char *base;   /* folder that relative paths are relative to */
    kvv_error *err;
    int line;           /* text: line number; JSON: case number (1-based) */
    bool json;
} pctx;

static kvv_status perr(pctx *p, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static kvv_status perr(pctx *p, const char *key, const char *fmt, ...)
{
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return kvv_error_set(p->err, KVV_ERR_FORMAT, "%s: %s %d: key %s: %s", p->file,
                         p->json ? "case" : "line", p->line, key, why);
}

static bool resolve(pctx *p, const char *v, char *dst, size_t cap)
{
    int n;
    if (v[0] == '/' || !p->base || !p->base[0] || strcmp(p->base, ".") == 0)
        n = snprintf(dst, cap, "%s", v);
    else
        n = snprintf(dst, cap, "%s/%s", p->base, v);
    return n > 0 && (size_t)n < cap;
}

static bool parse_long(const char *v, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (!*v || *end || errno || x < lo || x > hi)
        return false;
    *out = x;
    return true;
}

/* Apply one key=value to c. */
static kvv_status set_key(pctx *p, kvv_suite_case *c, const char *key, const char *v)
{
    long x;
    if (strcmp(key, "model") == 0) {
        if (!*v || !resolve(p, v, c->model, sizeof c->model))
            return perr(p, key, "empty or too long path");
    } else if (strcmp(key, "vector") == 0) {
        if (!*v || !resolve(p, v, c->vector, sizeof c->vector))
            return perr(p, key, "empty or too long path");
    } else if (strcmp(key, "engine") == 0) {
        if (!*v || strlen(v) >= sizeof c->engine)
            return perr(p, key, "'%s' is not an engine name", v);
        snprintf(c->engine, sizeof c->engine, "%s", v);
    } else if (strcmp(key, "mode") == 0) {
        kvv_mode m;
        if (!kvv_mode_from_name(v, &m))
            return perr(p, key, "'%s' is not exact, invariant or fast", v);
        snprintf(c->mode, sizeof c->mode, "%s", v);
    } else if (strcmp(key, "cache") == 0) {
        kvv_cache_type t;
        if (!kvv_cache_type_from_name(v, &t))
            return perr(p, key, "'%s' is not f32, f16 or bf16", v);
        snprintf(c->cache, sizeof c->cache, "%s", v);
    } else if (strcmp(key, "threads") == 0) {
        if (!parse_long(v, 1, 256, &x))
            return perr(p, key, "'%s' is not an integer in 1..256", v);
        c->threads = (int)x;
    } else if (strcmp(key, "tokens") == 0) {
        if (!parse_long(v, 1, 1 << 16, &x))
            return perr(p, key, "'%s' is not an integer in 1..65536", v);
        c->n_tokens = (int)x;
    } else if (strcmp(key, "n") == 0) {
        if (!parse_long(v, 1, 1 << 16, &x))
            return perr(p, key, "'%s' is not an integer in 1..65536", v);
        c->n_gen = (int)x;
    } else if (strcmp(key, "seed") == 0) {
        char *end;
        errno = 0;
        unsigned long long s = strtoull(v, &end, 10);
        if (!*v || *end || errno || v[0] == '-')
            return perr(p, key, "'%s' is not a non-negative integer", v);
        c->seed = (uint64_t)s;
    } else if (strcmp(key, "optional") == 0) {
        if (strcmp(v, "yes") != 0 && strcmp(v, "no") != 0)
            return perr(p, key, "'%s' is not yes or no", v);
        c->optional = strcmp(v, "yes") == 0;
    } else if (strcmp(key, "control") == 0) {
        int l, q, k = 0;
        if (strcmp(v, "force-fail") == 0)
            c->force_fail = true;
        else if (strcmp(v, "weight") == 0)
            c->control |= KVV_CTL_PERTURB_WEIGHT;
        else if (sscanf(v, "resid:%d:%d%n", &l, &q, &k) == 2 && v[k] == '\0' && l >= 0 && q >= 0) {
            c->perturb_layer = l;
            c->perturb_pos = q;
        } else
            return perr(p, key, "'%s' is not force-fail, weight or resid:LAYER:POS", v);
    } else if (strcmp(key, "checks") == 0) {
        char buf[256];
        if (strlen(v) >= sizeof buf)
            return perr(p, key, "list too long");
        snprintf(buf, sizeof buf, "%s", v);
        char *save = NULL;
        for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            size_t i = 0;
            while (i < N_CHECKS && strcmp(check_table[i].name, t) != 0)
                i++;
            if (i == N_CHECKS)
                return perr(p, key, "unknown check '%s' (kv, patch, greedy, invariance, kvdirect)", t);
            c->checks |= check_table[i].bit;
        }
        if (!c->checks)
            return perr(p, key, "empty list");
    } else {
        return perr(p, key, "unknown key (see docs/nightly.md)");
    }
    return KVV_OK;
}

static void case_defaults(kvv_suite_case *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->engine, sizeof c->engine, "ref");
    snprintf(c->cache, sizeof c->cache, "f32");
    c->threads = 1;
    c->n_tokens = 16;
    c->seed = 1;
    c->n_gen = 16;
    c->perturb_layer = -1;
    c->perturb_pos = -1;
}

/* Check a finished case and append it. */
static kvv_status add_case(pctx *p, kvv_suite *s, int *cap, const kvv_suite_case *c)
{
    if (!c->model[0])
        return perr(p, "model", "missing (every case names its model)");
    if (!c->checks && !c->vector[0])
        return perr(p, "checks", "a case needs checks=... or vector=...");
    for (int i = 0; i < s->n_cases; i++)
        if (strcmp(s->cases[i].name, c->name) == 0)
            return perr(p, "name", "'%s' already used at %d", c->name, s->cases[i].line);
    if (s->n_cases == *cap) {
        int nc = *cap ? *cap * 2 : 16;
        kvv_suite_case *n = realloc(s->cases, (size_t)nc * sizeof *n);
        if (!n)
            return kvv_error_set(p->err, KVV_ERR_NOMEM, "%s: out of memory", p->file);
        s->cases = n;
        *cap = nc;
    }
    s->cases[s->n_cases++] = *c;
    return KVV_OK;
}

static bool name_ok(const char *n)
{
    if (!*n || strlen(n) >= 64)
        return false;
    for (; *n; n++)
        if (!((*n >= 'a' && *n <= 'z') || (*n >= 'A' && *n <= 'Z') || (*n >= '0' && *n <= '9') ||
              *n == '_' || *n == '-' || *n == '.'))
            return false;
    return true;
}

static kvv_status parse_text(pctx *p, char *text, kvv_suite *s)
{
    int cap = 0;
    p->line = 0;
    /* lines by hand: strtok_r would merge blank lines and lose the count */
    for (char *ln = text; ln; ) {
        char *nl = strchr(ln, '\n');
        if (nl)
            *nl = '\0';
        p->line++;
        char *hash = strchr(ln, '#');
        if (hash)
            *hash = '\0';
        kvv_suite_case c;
        case_defaults(&c);
        c.line = p->line;
        int field = 0;
        char *tsave = NULL;
        for (char *t = strtok_r(ln, " \t\r", &tsave); t; t = strtok_r(NULL, " \t\r", &tsave), field++) {
            if (field == 0) {
                if (!name_ok(t))
                    return perr(p, "name", "'%s' is not a case name ([A-Za-z0-9_.-], < 64 chars)", t);
                snprintf(c.name, sizeof c.name, "%s", t);
                continue;
            }
            char *eq = strchr(t, '=');
            if (!eq)
                return perr(p, t, "expected key=value");
            *eq = '\0';
            kvv_status st = set_key(p, &c, t, eq + 1);
            if (st)
                return st;
        }
        if (field > 0) {
            kvv_status st = add_case(p, s, &cap, &c);
            if (st)
                return st;
        }
        ln = nl ? nl + 1 : NULL;
    }
    return KVV_OK;
}

static kvv_status parse_json(pctx *p, const char *text, size_t len, kvv_suite *s)
{
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return kvv_error_set(p->err, KVV_ERR_FORMAT, "%s: line %d: JSON: %s", p->file, je.line, je.text);
    json_t *cases = json_object_get(root, "cases");
    kvv_status st = KVV_OK;
    int cap = 0;
    p->json = true;
    if (!json_is_array(cases)) {
        p->line = 0;
        st = perr(p, "cases", "missing, or not an array");
    }
    for (size_t i = 0; !st && i < json_array_size(cases); i++) {
        json_t *o = json_array_get(cases, i);
        p->line = (int)i + 1;
        kvv_suite_case c;
        case_defaults(&c);
        c.line = p->line;
        if (!json_is_object(o)) {
            st = perr(p, "(case)", "not an object");
            break;
        }
        json_t *nm = json_object_get(o, "name");
        if (!json_is_string(nm) || !name_ok(json_string_value(nm))) {
            st = perr(p, "name", "missing or not a case name");
            break;
        }
        snprintf(c.name, sizeof c.name, "%s", json_string_value(nm));
        const char *key;
        json_t *v;
        json_object_foreach(o, key, v) {
            if (strcmp(key, "name") == 0)
                continue;
            char buf[1024];
            if (json_is_string(v))
                snprintf(buf, sizeof buf, "%s", json_string_value(v));
            else if (json_is_integer(v))
                snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(v));
            else if (json_is_boolean(v))
                snprintf(buf, sizeof buf, "%s", json_is_true(v) ? "yes" : "no");
            else if (json_is_array(v) && strcmp(key, "checks") == 0) {
                size_t off = 0;
                buf[0] = '\0';
                for (size_t k = 0; k < json_array_size(v); k++) {
                    json_t *e = json_array_get(v, k);
                    if (!json_is_string(e)) {
                        st = perr(p, key, "array item %zu is not a string", k);
                        break;
                    }
                    off += (size_t)snprintf(buf + off, off < sizeof buf ? sizeof buf - off : 0,
                                            "%s%s", k ? "," : "", json_string_value(e));
                }
            } else
                st = perr(p, key, "value of an unsupported JSON type");
            if (st)
                break;
            st = set_key(p, &c, key, buf);
            if (st)
                break;
        }
        if (!st)
            st = add_case(p, s, &cap, &c);
    }
    json_decref(root);
    return st;
}

kvv_status kvv_suite_parse(const char *text, size_t len, const char *name, const char *base_dir,
                           kvv_suite **out, kvv_error *err)
{
    *out = NULL;
    kvv_suite *s = calloc(1, sizeof *s);
    char *copy = malloc(len + 1);
    if (!s || !copy) {
        free(s);
        free(copy);
        return kvv_error_set(err, KVV_ERR_NOMEM, "%s: out of memory", name);
    }
    memcpy(copy, text, len);
    copy[len] = '\0';
    snprintf(s->path, sizeof s->path, "%s", name);
    pctx p = {name, base_dir ? base_dir : ".", err, 0, false};
    kvv_status st;
    if (strlen(copy) != len)
        st = kvv_error_set(err, KVV_ERR_FORMAT, "%s: byte %zu: NUL byte in a text file", name,
                           strlen(copy));
    else {
        size_t k = 0;
        while (k < len && (copy[k] == ' ' || copy[k] == '\t' || copy[k] == '\n' || copy[k] == '\r'))
            k++;
        st = k < len && copy[k] == '{' ? parse_json(&p, copy, len, s) : parse_text(&p, copy, s);
    }
    if (!st && s->n_cases == 0)
        st = kvv_error_set(err, KVV_ERR_FORMAT, "%s: no cases", name);
    free(copy);
    if (st) {
        kvv_suite_free(s);
        return st;
    }
    *out = s;
    return KVV_OK;
}

kvv_status kvv_suite_load(const char *path, kvv_suite **out, kvv_error *err)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return kvv_error_set(err, KVV_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 4096 > cap) {
            size_t nc = cap ? cap * 2 : 8192;
            char *nb = nc <= (64u << 20) ? realloc(buf, nc) : NULL;
            if (!nb) {
                free(buf);
                fclose(f);
                return kvv_error_set(err, KVV_ERR_FORMAT, "%s: larger than 64 MiB or out of memory", path);
            }
            buf = nb;
            cap = nc;
        }
        size_t k = fread(buf + n, 1, cap - n, f);
        n += k;
        if (k == 0)
            break;
    }
    fclose(f);
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    kvv_status st = kvv_suite_parse(buf, n, path, dir, out, err);
    free(buf);
    return st;
}

/* ============================================================ running */

void kvv_suite_results_free(kvv_suite_results *res)
{
    if (!res)
        return;
    for (int i = 0; i < res->n_out; i++)
        kvv_check_result_free(&res->out[i].r);
    free(res->out);
    res->out = NULL;
    res->n_out = res->cap_out = 0;
}

static kvv_check_result *new_outcome(kvv_suite_results *res, int ci, const char *name)
{
    if (res->n_out == res->cap_out) {
        int nc = res->cap_out ? res->cap_out * 2 : 16;
        kvv_suite_outcome *n = realloc(res->out, (size_t)nc * sizeof *n);
        if (!n)
            return NULL;
        res->out = n;
        res->cap_out = nc;
    }
    kvv_suite_outcome *o = &res->out[res->n_out++];
    o->case_index = ci;
    kvv_check_result_init(&o->r, name);
    return &o->r;
}

static void log_outcome(const kvv_suite_run_opts *ro, const kvv_suite_case *c, const kvv_check_result *r)
{
    if (!ro || !ro->log)
        return;
    fprintf(ro->log, "%-7s %s/%s  %s (%.2f s)%s%s\n", kvv_verdict_name(r->verdict), c->name, r->name,
            r->key_figure, r->seconds, r->message[0] ? "  " : "", r->message);
}

static kvv_engine_opts case_engine(const kvv_suite_case *c)
{
    kvv_engine_opts e = kvv_engine_opts_default();
    e.name = c->engine;
    if (c->mode[0])
        kvv_mode_from_name(c->mode, &e.mode);
    else
        e.mode = strcmp(c->engine, "ref") == 0 ? KVV_MODE_EXACT : KVV_MODE_INVARIANT;
    e.n_threads = c->threads;
    kvv_cache_type_from_name(c->cache, &e.cache_type);
    return e;
}

/* A golden-vector case: one testcase named "vector". */
static kvv_status run_vector(const kvv_suite_case *c, kvv_check_result *r)
{
    kvv_vectors_check_opts co = kvv_vectors_check_opts_default();
    co.engine = c->engine;
    co.mode = c->mode[0] ? c->mode : NULL;
    co.n_threads = c->threads;
    co.control = c->control;
    co.perturb_layer = c->perturb_layer;
    co.perturb_pos = c->perturb_pos;
    kvv_vectors_result vr;
    kvv_error err = {0};
    double t0 = kvv_now_seconds();
    kvv_status st = kvv_vectors_check(c->model, c->vector, &co, &vr, &err);
    r->seconds = kvv_now_seconds() - t0;
    if (st == KVV_ERR_NOMEM)
        return st;
    if (st) {
        kvv_check_set_error(r, &err);
        return KVV_OK;
    }
    kvv_check_set_engine(r, &vr.engine);
    uint64_t n = 0;
    for (int i = 0; i < vr.n_tally; i++)
        n += vr.tally[i].compared;
    if (r->details) {
        json_object_set_new(r->details, "vector", json_string(c->vector));
        json_object_set_new(r->details, "values_compared", json_integer((json_int_t)n));
        json_object_set_new(r->details, "divergences", json_integer((json_int_t)vr.n_diverged));
    }
    const bool is_control = c->control || c->perturb_layer >= 0;
    char line[512];
    if (!vr.diverged) {
        if (is_control) {
            kvv_check_set_verdict(r, KVV_VERDICT_FAIL, "control NOT detected: %llu values still "
                                  "bit-identical", (unsigned long long)n);
            kvv_check_set_message(r, "negative control (perturbed %s) was not detected",
                                  c->control ? "weight" : "residual");
        } else {
            kvv_check_set_verdict(r, KVV_VERDICT_PASS, "%llu values bit-identical",
                                  (unsigned long long)n);
        }
    } else if (is_control) {
        kvv_check_set_verdict(r, KVV_VERDICT_PASS, "control detected: %llu of %llu values diverge; "
                              "first divergence: %s", (unsigned long long)vr.n_diverged,
                              (unsigned long long)n,
                              kvv_divergence_format(&vr.first, line, sizeof line));
    } else {
        kvv_check_set_verdict(r, KVV_VERDICT_FAIL, "%llu of %llu values diverge",
                              (unsigned long long)vr.n_diverged, (unsigned long long)n);
        kvv_check_set_message(r, "first divergence: %s",
                              kvv_divergence_format(&vr.first, line, sizeof line));
    }
    return KVV_OK;
}

/* The checks= part of a case, on one opened model. */
static kvv_status run_checks(const kvv_suite_case *c, int ci, const kvv_suite_run_opts *ro,
                             kvv_suite_results *res)
{
    kvv_model *m = NULL;
    kvv_error err = {0};
    kvv_status st = kvv_model_open(c->model, &m, &err);
    int32_t *toks = NULL;
    if (!st) {
        toks = malloc(sizeof(int32_t) * (size_t)c->n_tokens);
        if (!toks)
            st = kvv_error_set(&err, KVV_ERR_NOMEM, "out of memory");
        else
            kvv_prompt_random(c->seed, m->hp.n_vocab, -1, toks, c->n_tokens);
    }
    for (size_t k = 0; k < N_CHECKS; k++) {
        if (!(c->checks & check_table[k].bit))
            continue;
        kvv_check_result *r = new_outcome(res, ci, check_table[k].name);
        if (!r) {
            st = KVV_ERR_NOMEM;
            break;
        }
        if (st) {
            /* the model did not open: every requested check reports why */
            kvv_check_set_error(r, &err);
        } else {
            kvv_check_opts o = kvv_check_opts_default();
            o.model = m;
            o.engine = case_engine(c);
            o.tokens = toks;
            o.n_tokens = c->n_tokens;
            o.n_gen = c->n_gen;
            o.seed = c->seed;
            o.force_fail = c->force_fail;
            kvv_error e2 = {0};
            double t0 = kvv_now_seconds();
            kvv_status cs = check_table[k].run(&o, r, &e2);
            if (r->seconds <= 0)
                r->seconds = kvv_now_seconds() - t0;
            if (cs == KVV_ERR_NOMEM) {
                st = cs;
                break;
            }
            if (cs && r->verdict != KVV_VERDICT_ERROR && r->verdict != KVV_VERDICT_SKIPPED)
                kvv_check_set_error(r, &e2);
            if (c->force_fail && r->verdict == KVV_VERDICT_FAIL) {
                /* the planted difference was found: the control passes */
                char key[sizeof r->key_figure];
                snprintf(key, sizeof key, "%s", r->key_figure);
                kvv_check_set_verdict(r, KVV_VERDICT_PASS, "control detected: %s", key);
            } else if (c->force_fail && r->verdict == KVV_VERDICT_PASS) {
                kvv_check_set_verdict(r, KVV_VERDICT_FAIL, "control NOT detected");
                kvv_check_set_message(r, "force-fail planted a difference the check did not find");
            }
        }
        log_outcome(ro, c, r);
    }
    free(toks);
    kvv_model_close(m);
    return st == KVV_ERR_NOMEM ? st : KVV_OK;
}

kvv_status kvv_suite_run(const kvv_suite *s, int shard_i, int shard_n,
                         const kvv_suite_run_opts *ro, kvv_suite_results *res, kvv_error *err)
{
    memset(res, 0, sizeof *res);
    res->suite = s;
    res->shard_i = shard_i;
    res->shard_n = shard_n;
    double t0 = kvv_now_seconds();
    for (int i = 0; i < s->n_cases; i++) {
        if (!kvv_suite_in_shard(i, shard_i, shard_n))
            continue;
        const kvv_suite_case *c = &s->cases[i];
        res->n_cases_run++;
        FILE *probe = fopen(c->model, "rb");
        if (!probe && c->optional) {
            /* an optional model that is absent (e.g. no ../shared): skipped */
            unsigned bits = c->checks;
            for (size_t k = 0; k <= N_CHECKS; k++) {
                bool vec = k == N_CHECKS;
                if (vec ? !c->vector[0] : !(bits & check_table[k].bit))
                    continue;
                kvv_check_result *r = new_outcome(res, i, vec ? "vector" : check_table[k].name);
                if (!r)
                    return kvv_error_set(err, KVV_ERR_NOMEM, "suite: out of memory");
                kvv_check_set_verdict(r, KVV_VERDICT_SKIPPED, "model not present");
                kvv_check_set_message(r, "SKIP: %s not found (optional=yes)", c->model);
                log_outcome(ro, c, r);
            }
            continue;
        }
        if (probe)
            fclose(probe);
        if (c->checks && run_checks(c, i, ro, res) == KVV_ERR_NOMEM)
            return kvv_error_set(err, KVV_ERR_NOMEM, "suite: out of memory");
        if (c->vector[0]) {
            kvv_check_result *r = new_outcome(res, i, "vector");
            if (!r || run_vector(c, r) == KVV_ERR_NOMEM)
                return kvv_error_set(err, KVV_ERR_NOMEM, "suite: out of memory");
            log_outcome(ro, c, r);
        }
    }
    res->seconds = kvv_now_seconds() - t0;
    return KVV_OK;
}

int kvv_suite_exit_code(const kvv_suite_results *res)
{
    int n[4] = {0, 0, 0, 0};
    for (int i = 0; i < res->n_out; i++)
        n[res->out[i].r.verdict]++;
    if (n[KVV_VERDICT_FAIL])
        return KVV_EXIT_FAIL;
    if (n[KVV_VERDICT_ERROR])
        return KVV_EXIT_BAD_INPUT;
    if (!n[KVV_VERDICT_PASS])
        return KVV_EXIT_NOTHING;
    return KVV_EXIT_PASS;
}

/* ============================================================ output */

typedef struct {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static void sb_put(sbuf *b, const char *s)
{
    size_t n = strlen(s);
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 8192;
        while (nc < b->n + n + 1)
            nc *= 2;
        char *q = realloc(b->p, nc);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n + 1);
    b->n += n;
}

static void sb_fmt(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_fmt(sbuf *b, const char *fmt, ...)
{
    char tmp[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    sb_put(b, tmp);
}

/* XML-escape s (attributes and text); control characters become spaces. */
static void sb_xml(sbuf *b, const char *s)
{
    char one[2] = {0, 0};
    for (; *s; s++) {
        switch (*s) {
        case '&': sb_put(b, "&amp;"); break;
        case '<': sb_put(b, "&lt;"); break;
        case '>': sb_put(b, "&gt;"); break;
        case '"': sb_put(b, "&quot;"); break;
        case '\'': sb_put(b, "&apos;"); break;
        default:
            one[0] = (unsigned char)*s < 0x20 && *s != '\n' && *s != '\t' ? ' ' : *s;
            sb_put(b, one);
        }
    }
}

/* The message a failing/erroring testcase carries. */
static const char *outcome_message(const kvv_check_result *r, char *buf, size_t size)
{
    if (r->has_mismatch) {
        char mm[384];
        snprintf(buf, size, "first mismatch %s", kvv_mismatch_format(&r->mismatch, mm, sizeof mm));
        return buf;
    }
    if (r->message[0])
        return r->message;
    return r->key_figure;
}

kvv_status kvv_suite_write_junit(const kvv_suite_results *res, const char *path, kvv_error *err)
{
    int n[4] = {0, 0, 0, 0};
    for (int i = 0; i < res->n_out; i++)
        n[res->out[i].r.verdict]++;
    sbuf b = {0};
    sb_put(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n");
    sb_put(&b, "<testsuite name=\"kvverify suite ");
    sb_xml(&b, res->suite->path);
    sb_fmt(&b, " shard %d/%d\" tests=\"%d\" failures=\"%d\" errors=\"%d\" skipped=\"%d\" "
               "time=\"%.3f\">\n", res->shard_i, res->shard_n, res->n_out, n[KVV_VERDICT_FAIL],
           n[KVV_VERDICT_ERROR], n[KVV_VERDICT_SKIPPED], res->seconds);
    for (int i = 0; i < res->n_out; i++) {
        const kvv_check_result *r = &res->out[i].r;
        const kvv_suite_case *c = &res->suite->cases[res->out[i].case_index];
        char msg[640];
        sb_put(&b, "  <testcase classname=\"kvverify.suite.");
        sb_xml(&b, c->name);
        sb_put(&b, "\" name=\"");
        sb_xml(&b, r->name);
        sb_fmt(&b, "\" time=\"%.3f\">\n", r->seconds);
        const char *tag = r->verdict == KVV_VERDICT_FAIL    ? "failure"
                          : r->verdict == KVV_VERDICT_ERROR ? "error"
                          : r->verdict == KVV_VERDICT_SKIPPED ? "skipped" : NULL;
        if (tag) {
            sb_fmt(&b, "    <%s message=\"", tag);
            sb_xml(&b, outcome_message(r, msg, sizeof msg));
            sb_put(&b, "\"/>\n");
        }
        sb_put(&b, "    <system-out>model=");
        sb_xml(&b, c->model);
        sb_fmt(&b, " engine=%s mode=%s cache=%s threads=%d", c->engine,
               kvv_mode_name(case_engine(c).mode), c->cache, c->threads);
        if (c->vector[0]) {
            sb_put(&b, " vector=");
            sb_xml(&b, c->vector);
        }
        sb_put(&b, "\n");
        sb_xml(&b, r->key_figure);
        sb_put(&b, "</system-out>\n  </testcase>\n");
    }
    sb_put(&b, "</testsuite>\n</testsuites>\n");
    if (b.oom) {
        free(b.p);
        return kvv_error_set(err, KVV_ERR_NOMEM, "%s: out of memory building JUnit XML", path);
    }
    kvv_status st = kvv_write_file_atomic(path, b.p, b.n, err);
    free(b.p);
    return st;
}

json_t *kvv_suite_results_to_json(const kvv_suite_results *res)
{
    json_t *cases = json_array();
    int n[4] = {0, 0, 0, 0};
    for (int i = 0; i < res->n_out; i++) {
        const kvv_check_result *r = &res->out[i].r;
        const kvv_suite_case *c = &res->suite->cases[res->out[i].case_index];
        n[r->verdict]++;
        json_t *j = json_pack("{s:s, s:i, s:s, s:s, s:s, s:s, s:i, s:s, s:o}", "case", c->name,
                              "case_index", res->out[i].case_index, "model", c->model, "engine",
                              c->engine, "mode", kvv_mode_name(case_engine(c).mode), "cache_type",
                              c->cache, "threads", c->threads, "vector", c->vector,
                              "result", kvv_check_to_json(r));
        json_array_append_new(cases, j);
    }
    char shard[32];
    snprintf(shard, sizeof shard, "%d/%d", res->shard_i, res->shard_n);
    return json_pack("{s:s, s:s, s:i, s:f, s:o, s:{s:i, s:i, s:i, s:i}, s:i}", "manifest",
                     res->suite->path, "shard", shard, "cases_run", res->n_cases_run, "seconds",
                     res->seconds, "results", cases, "summary", "pass", n[KVV_VERDICT_PASS],
                     "fail", n[KVV_VERDICT_FAIL], "error", n[KVV_VERDICT_ERROR], "skipped",
                     n[KVV_VERDICT_SKIPPED], "exit_code", kvv_suite_exit_code(res));
}
