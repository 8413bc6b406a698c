/* http.c — libcurl JSON requests with a time limit (see http.h). */
#include "verify/serve/http.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

/* An answer larger than this is not a completion: refused, never buffered. */
#define KVV_HTTP_MAX_BODY (64u << 20)

typedef struct {
    char *buf;
    size_t n, cap;
    bool too_big;
} body_buf;

static size_t on_data(char *p, size_t size, size_t nmemb, void *user)
{
    body_buf *b = user;
    size_t n = size * nmemb;
    if (b->n + n + 1 > KVV_HTTP_MAX_BODY) {
        b->too_big = true;
        return 0; /* curl aborts the transfer */
    }
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *nb = realloc(b->buf, cap);
        if (!nb)
            return 0;
        b->buf = nb;
        b->cap = cap;
    }
    memcpy(b->buf + b->n, p, n);
    b->n += n;
    b->buf[b->n] = 0;
    return n;
}

kvv_status kvv_http_global_init(kvv_error *err)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return kvv_error_set(err, KVV_ERR_INTERNAL, "libcurl: global initialisation failed");
    return KVV_OK;
}

void kvv_http_global_cleanup(void)
{
    curl_global_cleanup();
}

/* The body's first bytes, printable, for a message. */
static void snippet(const body_buf *b, char *out, size_t size)
{
    size_t j = 0;
    for (size_t i = 0; b->buf && i < b->n && j + 1 < size && i < 160; i++) {
        unsigned char c = (unsigned char)b->buf[i];
        out[j++] = c >= 32 && c < 127 ? (char)c : ' ';
    }
    out[j] = 0;
}

kvv_status kvv_http_json(const char *base, const char *method, const char *path,
                         const json_t *body, double timeout, const char *what, json_t **out,
                         kvv_error *err)
{
    *out = NULL;
    char url[1024];
    size_t bl = strlen(base);
    while (bl > 0 && base[bl - 1] == '/')
        bl--; /* "http://h:p/" + "/completion" */
    if (snprintf(url, sizeof url, "%.*s%s", (int)bl, base, path) >= (int)sizeof url)
        return kvv_error_set(err, KVV_ERR_USAGE, "URL %s: too long", base);
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    if (body && !text)
        return kvv_error_set(err, KVV_ERR_NOMEM, "%s %s (%s): out of memory", method, url, what);
    CURL *c = curl_easy_init();
    if (!c) {
        free(text);
        return kvv_error_set(err, KVV_ERR_NOMEM, "%s %s (%s): libcurl: no handle", method, url,
                             what);
    }
    body_buf b = {0};
    char ebuf[CURL_ERROR_SIZE] = "";
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L); /* threads: no SIGALRM for timeouts */
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(timeout * 1000));
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)(timeout * 1000));
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, ebuf);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(c, CURLOPT_PROXY, ""); /* the server named, never a proxy from the environment */
    if (text) {
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, text);
    }
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(c);
    free(text);
    kvv_status st = KVV_OK;
    char snip[200];
    snippet(&b, snip, sizeof snip);
    if (rc == CURLE_OPERATION_TIMEDOUT)
        st = kvv_error_set(err, KVV_ERR_IO, "%s %s (%s): no answer within %g s (--timeout)",
                           method, url, what, timeout);
    else if (b.too_big)
        st = kvv_error_set(err, KVV_ERR_IO, "%s %s (%s): answer larger than %u bytes", method,
                           url, what, KVV_HTTP_MAX_BODY);
    else if (rc != CURLE_OK)
        st = kvv_error_set(err, KVV_ERR_IO, "%s %s (%s): %s", method, url, what,
                           ebuf[0] ? ebuf : curl_easy_strerror(rc));
    else if (status >= 400)
        st = kvv_error_set(err, KVV_ERR_IO, "%s %s (%s): HTTP %ld: %s", method, url, what,
                           status, snip[0] ? snip : "(empty body)");
    else {
        json_error_t je;
        /* JSON_ALLOW_NUL: a token's text may be the byte 0 ("\u0000", llama-server
         * on a byte-fallback vocabulary); only ids and logprobs are read */
        *out = b.buf ? json_loadb(b.buf, b.n, JSON_ALLOW_NUL, &je) : NULL;
        if (!*out)
            st = kvv_error_set(err, KVV_ERR_IO,
                               "%s %s (%s): HTTP %ld, body is not JSON (%s): %s", method, url,
                               what, status, b.buf ? je.text : "empty body",
                               snip[0] ? snip : "(empty)");
    }
    free(b.buf);
    return st;
}
