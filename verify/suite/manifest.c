/* manifest.c — a suite's manifest, text or JSON, parsed into cases; and
 * the shard arithmetic. See suite.h; the syntax is in docs/nightly.md. The
 * checks a case may name are the audit's table (verify/audit.h). */
#include "verify/suite/suite.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common/read_file.h"
#include "engine/cpu/cpu_isa.h"
#include "engine/engine.h"
#include "verify/audit.h"

#define KVV_SUITE_PLUGIN_PREFIX "plugin:"

/* The engine options a case holds (its own copies). */
static void case_free_opts(kvv_suite_case *c)
{
    for (int i = 0; i < c->n_engine_opts; i++)
        free((char *)c->engine_opts[i]);
    c->n_engine_opts = 0;
}

void kvv_suite_free(kvv_suite *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->n_cases; i++)
        case_free_opts(&s->cases[i]);
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

unsigned kvv_suite_check_bit(const char *name)
{
    int n;
    const kvv_check_entry *t = kvv_audit_checks(&n);
    const kvv_check_entry *e = kvv_audit_find(name);
    return e ? 1u << (e - t) : 0;
}

/* "kv, patch, ..." for messages. @return buf. */
static const char *check_names(char *buf, size_t size)
{
    int n;
    const kvv_check_entry *t = kvv_audit_checks(&n);
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && off < size; i++) {
        int w = snprintf(buf + off, size - off, "%s%s", i ? ", " : "", t[i].name);
        if (w < 0)
            break;
        off += (size_t)w;
    }
    return buf;
}

typedef struct {
    const char *file;
    const char *base;   /* folder that relative paths are relative to */
    kvv_error *err;
    int line;           /* text: line number; JSON: case number (1-based) */
    bool json;
    int *names;         /* case names by hash: case index + 1, 0 = empty */
    size_t names_mask;  /* slots - 1 (a power of two, at least twice the cases) */
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
        const size_t np = strlen(KVV_SUITE_PLUGIN_PREFIX);
        if (strncmp(v, KVV_SUITE_PLUGIN_PREFIX, np) == 0) { /* plugin:PATH, PATH as model= */
            char path[1024];
            if (!v[np] || !resolve(p, v + np, path, sizeof path))
                return perr(p, key, "empty or too long plugin path");
            snprintf(c->engine, sizeof c->engine, KVV_SUITE_PLUGIN_PREFIX "%s", path);
        } else if (!*v || strlen(v) >= sizeof c->engine) {
            return perr(p, key, "'%s' is not an engine name", v);
        } else {
            snprintf(c->engine, sizeof c->engine, "%s", v);
        }
    } else if (strcmp(key, "device") == 0) {
        if (!*v || strlen(v) >= sizeof c->device)
            return perr(p, key, "'%s' is not a device name", v);
        snprintf(c->device, sizeof c->device, "%s", v);
    } else if (strcmp(key, "isa") == 0) {
        kvv_cpu_isa t;
        if (strcmp(v, "auto") != 0 && !kvv_cpu_isa_from_name(v, &t))
            return perr(p, key, "'%s' is not generic, avx2, avx512 or auto", v);
        snprintf(c->isa, sizeof c->isa, "%s", v);
    } else if (strcmp(key, "ubatch") == 0) {
        if (!parse_long(v, 1, 1 << 20, &x))
            return perr(p, key, "'%s' is not an integer in 1..1048576", v);
        c->n_ubatch = (int)x;
    } else if (strcmp(key, "engine-opt") == 0) {
        const char *eq = strchr(v, '=');
        if (!eq || eq == v)
            return perr(p, key, "'%s' is not KEY=VALUE", v);
        if (c->n_engine_opts >= KVV_SUITE_MAX_EOPTS)
            return perr(p, key, "more than %d engine options", KVV_SUITE_MAX_EOPTS);
        char *copy = strdup(v);
        if (!copy)
            return kvv_error_set(p->err, KVV_ERR_NOMEM, "%s: out of memory", p->file);
        c->engine_opts[c->n_engine_opts++] = copy;
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
        if (!parse_long(v, 1, KVV_ENGINE_MAX_THREADS, &x))
            return perr(p, key, "'%s' is not an integer in 1..%d", v, KVV_ENGINE_MAX_THREADS);
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
            unsigned bit = kvv_suite_check_bit(t);
            if (!bit) {
                char names[256];
                return perr(p, key, "unknown check '%s' (%s)", t, check_names(names, sizeof names));
            }
            c->checks |= bit;
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
    c->n_tokens = 0; /* 0: the floor for the case's engine (kvv_suite_case_workload) */
    c->seed = 1;
    c->n_gen = 0;
    c->perturb_layer = -1;
    c->perturb_pos = -1;
}

/* The slot of p->names holding case name n, or the empty one it would
 * take (FNV-1a, linear probing): duplicate names are found in constant
 * time, so a manifest of many cases parses in linear time. */
static int *name_slot(const pctx *p, const kvv_suite *s, const char *n)
{
    uint32_t h = 2166136261u;
    for (const char *c = n; *c; c++)
        h = (h ^ (uint8_t)*c) * 16777619u;
    for (size_t i = h & p->names_mask;; i = (i + 1) & p->names_mask)
        if (!p->names[i] || strcmp(s->cases[p->names[i] - 1].name, n) == 0)
            return &p->names[i];
}

/* Room for cap cases and twice as many name slots. */
static bool grow(pctx *p, kvv_suite *s, int cap)
{
    kvv_suite_case *nc = realloc(s->cases, (size_t)cap * sizeof *nc);
    if (!nc)
        return false;
    s->cases = nc;
    int *slots = calloc(2 * (size_t)cap, sizeof *slots);
    if (!slots)
        return false;
    free(p->names);
    p->names = slots;
    p->names_mask = 2 * (size_t)cap - 1;
    for (int i = 0; i < s->n_cases; i++)
        *name_slot(p, s, s->cases[i].name) = i + 1;
    return true;
}

/* Check a finished case and append it. */
static kvv_status add_case(pctx *p, kvv_suite *s, int *cap, const kvv_suite_case *c)
{
    if (!c->model[0])
        return perr(p, "model", "missing (every case names its model)");
    if (!c->checks && !c->vector[0])
        return perr(p, "checks", "a case needs checks=... or vector=...");
    kvv_error oerr = {0};
    if (c->isa[0] && kvv_engine_check_opt(c->engine, KVV_ENGINE_OPT_ISA, c->isa, &oerr))
        return perr(p, "isa", "%s", oerr.msg);
    if (s->n_cases > 0) {
        int used = *name_slot(p, s, c->name);
        if (used)
            return perr(p, "name", "'%s' already used at %d", c->name, s->cases[used - 1].line);
    }
    if (s->n_cases == KVV_SUITE_MAX_CASES)
        return perr(p, "name", "more than %d cases in one manifest", KVV_SUITE_MAX_CASES);
    if (s->n_cases == *cap) {
        int nc = *cap ? *cap * 2 : 16;
        if (!grow(p, s, nc))
            return kvv_error_set(p->err, KVV_ERR_NOMEM, "%s: out of memory", p->file);
        *cap = nc;
    }
    s->cases[s->n_cases] = *c;
    *name_slot(p, s, c->name) = s->n_cases + 1;
    s->n_cases++;
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
            if (!eq) {
                case_free_opts(&c); /* engine-opt= values already copied (fuzz_manifest) */
                return perr(p, t, "expected key=value");
            }
            *eq = '\0';
            kvv_status st = set_key(p, &c, t, eq + 1);
            if (st) {
                case_free_opts(&c);
                return st;
            }
        }
        if (field > 0) {
            kvv_status st = add_case(p, s, &cap, &c);
            if (st) {
                case_free_opts(&c);
                return st;
            }
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
            if (json_is_array(v) && strcmp(key, "engine-opt") == 0) { /* one key each */
                for (size_t k = 0; !st && k < json_array_size(v); k++) {
                    json_t *e = json_array_get(v, k);
                    st = json_is_string(e) ? set_key(p, &c, key, json_string_value(e))
                                           : perr(p, key, "array item %zu is not a string", k);
                }
                if (st)
                    break;
                continue;
            }
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
                    if (off < sizeof buf)
                        off += (size_t)snprintf(buf + off, sizeof buf - off, "%s%s", k ? "," : "",
                                                json_string_value(e));
                }
                if (!st && off >= sizeof buf)
                    st = perr(p, key, "list too long");
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
        if (st)
            case_free_opts(&c);
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
    pctx p = {name, base_dir ? base_dir : ".", err, 0, false, NULL, 0};
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
    free(p.names);
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
    char *buf;
    size_t n;
    kvv_status st = kvv_read_file(path, (size_t)64 << 20, &buf, &n, err); /* ferror checked */
    if (st)
        return st;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    st = kvv_suite_parse(buf, n, path, dir, out, err);
    free(buf);
    return st;
}
