/*
 * test_serve_api.c — the completion dialects of `kvverify serve`
 * (verify/serve/server_api.h): the request body, llama-server's answer, the
 * legacy OpenAI answer with token_id:N, every malformed answer refused with
 * the field named, and the bit-level comparison. No server, no ../shared.
 */
#include <string.h>

#include "tests/test_util.h"
#include "verify/serve/server_api.h"

static const int32_t prompt[3] = {1, 7, 9};
static const kvv_serve_req req = {.prompt = prompt, .n_prompt = 3, .n_predict = 2, .n_probs = 2};

static json_t *load(const char *s)
{
    json_error_t je;
    json_t *j = json_loads(s, 0, &je);
    assert_non_null(j);
    return j;
}

static const char *llama_ok =
    "{\"tokens_cached\": 2, \"completion_probabilities\": ["
    "{\"id\": 5, \"logprob\": -0.25, \"top_logprobs\": [{\"id\": 5, \"logprob\": -0.25}, {\"id\": 6, \"logprob\": -1.5}]},"
    "{\"id\": 6, \"logprob\": -0.125, \"top_logprobs\": [{\"id\": 6, \"logprob\": -0.125}, {\"id\": 2, \"logprob\": -3}]}]}";

static void test_request(void **state)
{
    (void)state;
    json_t *b = kvv_serve_request_json(KVV_SERVE_API_LLAMA, &req);
    assert_non_null(b);
    assert_int_equal(json_array_size(json_object_get(b, "prompt")), 3);
    assert_int_equal(json_integer_value(json_array_get(json_object_get(b, "prompt"), 1)), 7);
    assert_int_equal(json_integer_value(json_object_get(b, "n_probs")), 2);
    assert_true(json_number_value(json_object_get(b, "temperature")) == 0);
    assert_true(json_is_false(json_object_get(b, "cache_prompt")));
    json_decref(b);
    kvv_serve_req q = req;
    q.cache_prompt = true;
    q.model_name = "m";
    b = kvv_serve_request_json(KVV_SERVE_API_OPENAI, &q);
    assert_int_equal(json_integer_value(json_object_get(b, "max_tokens")), 2);
    assert_int_equal(json_integer_value(json_object_get(b, "logprobs")), 2);
    assert_string_equal(json_string_value(json_object_get(b, "model")), "m");
    assert_true(json_is_true(json_object_get(b, "cache_prompt")));
    json_decref(b);
    assert_string_equal(kvv_serve_api_path(KVV_SERVE_API_OPENAI), "/v1/completions");
    kvv_serve_api a;
    assert_int_equal(kvv_serve_api_from_name("grpc", &a), 0);
}

static void test_llama(void **state)
{
    (void)state;
    json_t *j = load(llama_ok);
    kvv_serve_completion c;
    kvv_error err = {0};
    assert_int_equal(kvv_serve_parse(KVV_SERVE_API_LLAMA, j, &req, 16, "t", &c, &err), KVV_OK);
    assert_int_equal(c.n, 2);
    assert_int_equal(c.tokens[1], 6);
    assert_true(c.logprob[0] == -0.25f && c.top_lp[3] == -3.0f && c.top_id[2] == 6);
    assert_int_equal(c.n_cached, 2);
    /* the same answer compares equal; one ULP anywhere is found at its step */
    kvv_serve_completion d;
    assert_int_equal(kvv_serve_completion_copy(&d, &c), KVV_OK);
    int tok;
    assert_int_equal(kvv_serve_completion_diff(&c, &d, &tok), -1);
    assert_int_equal(tok, -1);
    kvv_serve_completion_plant(&d, 1);
    assert_int_equal(kvv_serve_completion_diff(&c, &d, &tok), 1);
    assert_int_equal(tok, -1);
    d.tokens[0] = 9;
    assert_int_equal(kvv_serve_completion_diff(&c, &d, &tok), 0);
    assert_int_equal(tok, 0);
    kvv_serve_completion_free(&d);
    kvv_serve_completion_free(&c);
    /* an id outside the GGUF's vocabulary */
    assert_int_equal(kvv_serve_parse(KVV_SERVE_API_LLAMA, j, &req, 6, "t", &c, &err), KVV_ERR_IO);
    assert_non_null(strstr(err.msg, "completion_probabilities[0].top_logprobs[1]"));
    kvv_serve_completion_free(&c);
    /* fewer steps than asked */
    kvv_serve_req q = req;
    q.n_predict = 3;
    assert_int_equal(kvv_serve_parse(KVV_SERVE_API_LLAMA, j, &q, 16, "t", &c, &err), KVV_ERR_IO);
    assert_non_null(strstr(err.msg, "2 steps"));
    kvv_serve_completion_free(&c);
    json_decref(j);
}

static void test_bad(void **state)
{
    (void)state;
    static const char *const bad[][2] = {
        {"{\"content\": \"x\"}", "completion_probabilities"},
        {"[1, 2]", "not a JSON object"},
        {"{\"completion_probabilities\": [{\"id\": 1, \"logprob\": 0.5, \"top_logprobs\": [{\"id\": 1, \"logprob\": -1}]}]}",
         "completion_probabilities[0].logprob"},
        {"{\"completion_probabilities\": [{\"id\": 1, \"logprob\": -1}]}", "top_logprobs"},
        {"{\"completion_probabilities\": [{\"id\": \"a\", \"logprob\": -1}]}", "completion_probabilities[0].id"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *j = load(bad[i][0]);
        kvv_serve_completion c;
        kvv_error err = {0};
        assert_int_equal(kvv_serve_parse(KVV_SERVE_API_LLAMA, j, &req, 16, "req 7", &c, &err), KVV_ERR_IO);
        assert_non_null(strstr(err.msg, bad[i][1]));
        assert_non_null(strstr(err.msg, "req 7"));
        kvv_serve_completion_free(&c);
        json_decref(j);
    }
}

static void test_openai(void **state)
{
    (void)state;
    /* legacy: ids as token_id:N, top_logprobs an object in any order */
    json_t *j = load("{\"choices\": [{\"logprobs\": {\"tokens\": [\"token_id:5\", \"token_id:6\"],"
                     "\"token_logprobs\": [-0.25, -0.125], \"top_logprobs\": ["
                     "{\"token_id:6\": -1.5, \"token_id:5\": -0.25, \"token_id:3\": -4},"
                     "{\"token_id:6\": -0.125, \"token_id:2\": -3}]}}],"
                     "\"usage\": {\"prompt_tokens_details\": {\"cached_tokens\": 1}}}");
    kvv_serve_completion c, l;
    kvv_error err = {0};
    assert_int_equal(kvv_serve_parse(KVV_SERVE_API_OPENAI, j, &req, 16, "t", &c, &err), KVV_OK);
    assert_int_equal(c.n_cached, 1);
    json_t *lj = load(llama_ok);
    assert_int_equal(kvv_serve_parse(KVV_SERVE_API_LLAMA, lj, &req, 16, "t", &l, &err), KVV_OK);
    assert_int_equal(kvv_serve_completion_diff(&l, &c, NULL), -1); /* the same completion */
    kvv_serve_completion_free(&c);
    kvv_serve_completion_free(&l);
    json_decref(j);
    json_decref(lj);
    /* token text cannot be mapped back to ids: refused */
    j = load("{\"choices\": [{\"logprobs\": {\"tokens\": [\" the\"], \"token_logprobs\": [-1],"
             "\"top_logprobs\": [{\" the\": -1}]}}]}");
    assert_int_equal(kvv_serve_parse(KVV_SERVE_API_OPENAI, j, &req, 16, "t", &c, &err), KVV_ERR_IO);
    assert_non_null(strstr(err.msg, "token_id:N"));
    kvv_serve_completion_free(&c);
    json_decref(j);
    /* no logprobs at all */
    j = load("{\"choices\": [{\"text\": \"x\", \"logprobs\": null}]}");
    assert_int_equal(kvv_serve_parse(KVV_SERVE_API_OPENAI, j, &req, 16, "t", &c, &err), KVV_ERR_IO);
    assert_non_null(strstr(err.msg, "logprobs"));
    kvv_serve_completion_free(&c);
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request), cmocka_unit_test(test_llama), cmocka_unit_test(test_bad),
        cmocka_unit_test(test_openai),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
