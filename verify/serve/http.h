/*
 * http.h — the HTTP client of `kvverify serve` (libcurl): one JSON request,
 * one JSON answer, under a time limit, every failure a message naming the
 * request. Thread-safe after kvv_http_global_init (one easy handle per call).
 *
 *   kvv_http_global_init(&err);                   // once, before any thread
 *   json_t *ans = NULL;
 *   if (kvv_http_json(base, "POST", "/completion", body, 30, "repeat #2", &ans, &err))
 *       ... err.msg: "POST http://127.0.0.1:8080/completion (repeat #2): HTTP 500: ..."
 *   json_decref(ans);
 *
 * What is an error (KVV_ERR_IO): the URL cannot be reached (refused,
 * unknown host), the connection is reset or closed before the whole answer,
 * no answer within the limit, an HTTP status of 400 or more (the body's
 * first bytes in the message), a body that is not one JSON value.
 */
#ifndef KVV_SERVE_HTTP_H
#define KVV_SERVE_HTTP_H

#include <jansson.h>

#include "common/error.h"

/* curl_global_init, once per process (not thread-safe itself).
 * @return KVV_OK or KVV_ERR_INTERNAL. */
kvv_status kvv_http_global_init(kvv_error *err);
/* Its pair (curl_global_cleanup), once no request is in flight. */
void kvv_http_global_cleanup(void);

/* Send `method` ("GET" or "POST") to base+path with body (a JSON object,
 * borrowed; NULL for GET), wait at most timeout seconds for the whole
 * answer, parse it. `what` names the request in messages. On KVV_OK *out is
 * the answer (caller json_decref's); else *out is NULL and err says which
 * request failed and how. */
kvv_status kvv_http_json(const char *base, const char *method, const char *path,
                         const json_t *body, double timeout, const char *what, json_t **out,
                         kvv_error *err);

#endif
