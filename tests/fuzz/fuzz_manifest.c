/*
 * fuzz_manifest.c — libFuzzer target for the suite manifest parser
 * (verify/suite/manifest.c: text and JSON manifests, shards).
 *
 *   make fuzz-one FUZZ_TARGET=fuzz_manifest
 *   build/tests/fuzz/replay_fuzz_manifest tests/fuzz/corpus/manifest   # inside make test
 *
 * The whole input is a manifest (text, or JSON when it starts with '{'),
 * parsed as if it sat in the folder "base". Nothing is opened or run.
 *
 * Properties (a broken one calls abort()):
 *   - KVV_OK, or KVV_ERR_FORMAT / KVV_ERR_NOMEM with a message that starts
 *     with the manifest's name (and, for a key, names the line and key);
 *   - an accepted manifest has at least one case and at most
 *     KVV_SUITE_MAX_CASES; every case has a unique valid name, a model
 *     path, checks or a vector, and every number inside its documented
 *     range; a relative model path was resolved under "base/";
 *   - every shard count N from 1 to 7 puts each case in exactly one of the
 *     N shards; the engine options of each case are well formed;
 *   - the last line of the input, read as "I/N", is accepted by
 *     kvv_suite_parse_shard only when 1 <= I <= N <= 100000.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verify/suite/suite.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        abort();
}

static bool name_ok(const char *n)
{
    size_t len = strlen(n);
    if (len == 0 || len >= 64)
        return false;
    for (; *n; n++)
        if (!((*n >= 'a' && *n <= 'z') || (*n >= 'A' && *n <= 'Z') || (*n >= '0' && *n <= '9') ||
              *n == '_' || *n == '-' || *n == '.'))
            return false;
    return true;
}

static void check_case(const kvv_suite *s, int i)
{
    const kvv_suite_case *c = &s->cases[i];
    check(name_ok(c->name));
    for (int j = 0; j < i; j++)
        check(strcmp(s->cases[j].name, c->name) != 0);
    check(c->model[0] != '\0');
    check(c->model[0] == '/' || strncmp(c->model, "base/", 5) == 0);
    check(c->checks != 0 || c->vector[0] != '\0');
    check(c->threads >= 1 && c->threads <= KVV_ENGINE_MAX_THREADS);
    check(c->n_tokens >= 0 && c->n_tokens <= 65536); /* 0: not given, the floor */
    check(c->n_gen >= 0 && c->n_gen <= 65536);
    check(c->perturb_layer >= -1 && (c->perturb_layer < 0) == (c->perturb_pos < 0));
    kvv_cache_type ct;
    check(kvv_cache_type_from_name(c->cache, &ct));
    kvv_engine_opts eo = kvv_suite_case_engine(c);
    check(eo.name != NULL && eo.n_threads == c->threads);
}

/* Each case in exactly one of n shards. */
static void check_shards(const kvv_suite *s, int n)
{
    for (int i = 0; i < s->n_cases; i++) {
        int hits = 0;
        for (int k = 1; k <= n; k++)
            hits += kvv_suite_in_shard(i, k, n);
        check(hits == 1);
    }
}

/* The input's last line as a --shard value. */
static void check_shard_text(const uint8_t *data, size_t size)
{
    size_t start = size;
    while (start > 0 && data[start - 1] != '\n')
        start--;
    size_t len = size - start;
    if (len > 32)
        return;
    char buf[40];
    memcpy(buf, data + start, len);
    buf[len] = '\0';
    int si = 0, sn = 0;
    if (kvv_suite_parse_shard(buf, &si, &sn))
        check(si >= 1 && si <= sn && sn <= 100000);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kvv_suite *s = NULL;
    kvv_error err = {0};
    kvv_status st = kvv_suite_parse((const char *)data, size, "fuzz.txt", "base", &s, &err);
    check_shard_text(data, size);
    if (st != KVV_OK) {
        check(s == NULL);
        check(st == KVV_ERR_FORMAT || st == KVV_ERR_NOMEM);
        check(strncmp(err.msg, "fuzz.txt: ", 10) == 0);
        return 0;
    }
    check(s != NULL && s->n_cases >= 1 && s->n_cases <= KVV_SUITE_MAX_CASES);
    for (int i = 0; i < s->n_cases; i++)
        check_case(s, i);
    for (int n = 1; n <= 7; n++)
        check_shards(s, n);
    kvv_suite_free(s);
    return 0;
}
