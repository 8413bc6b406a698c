/*
 * error.h — kvverify's error values (STYLE habit 3: errors are values).
 *
 * Every fallible library function returns a kvv_status and, on failure, fills
 * a caller-owned kvv_error whose message names the file, the field and the
 * byte offset where that makes sense. Library code never exits; cli/ maps a
 * status to an exit code with kvv_exit_code().
 *
 *   kvv_error err = {0};
 *   if (kvv_gguf_open(path, &g, &err) != KVV_OK) {
 *       fprintf(stderr, "kvverify: %s\n", err.msg);
 *       return kvv_exit_code(err.status);
 *   }
 */
#ifndef KVV_ERROR_H
#define KVV_ERROR_H

#include <stdarg.h>

typedef enum {
    KVV_OK = 0,
    KVV_ERR_IO,          /* cannot open, read, map or write a file            -> exit 2  */
    KVV_ERR_FORMAT,      /* malformed input file (GGUF, .kvv, manifest, ...)  -> exit 2  */
    KVV_ERR_USAGE,       /* bad option or argument                            -> exit 2  */
    KVV_ERR_UNSUPPORTED, /* valid input kvverify cannot check (arch, type)    -> exit 77 */
    KVV_ERR_NOMEM,       /* allocation failed                                 -> exit 2  */
    KVV_ERR_INTERNAL,    /* a "can't happen" check fired                      -> exit 2  */
    KVV_ERR_ENGINE       /* the engine under test broke its contract (wrote past a
                            buffer, left outputs unwritten, returned NaN/Inf): a
                            certification result, fault "contract"         -> exit 1  */
} kvv_status;

#define KVV_ERROR_MSG_MAX 512

typedef struct {
    kvv_status status;          /* KVV_OK until the first kvv_error_set */
    char msg[KVV_ERROR_MSG_MAX]; /* one line, no trailing newline */
} kvv_error;

/* Record status and a printf-style message in err (err may be NULL).
 * @return status, so callers can write `return kvv_error_set(err, ...)`. */
kvv_status kvv_error_set(kvv_error *err, kvv_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
kvv_status kvv_error_setv(kvv_error *err, kvv_status status, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/* Static name of a status ("format error", ...). Never NULL. */
const char *kvv_strerror(kvv_status status);

/* Exit code per DESIGN.md §6: KVV_OK 0, UNSUPPORTED 77, everything else 2. */
int kvv_exit_code(kvv_status status);

/* Exit codes of the kvverify command (DESIGN.md §6). */
enum {
    KVV_EXIT_PASS = 0,        /* every requested check ran and passed */
    KVV_EXIT_FAIL = 1,        /* a check ran and failed */
    KVV_EXIT_BAD_INPUT = 2,   /* bad input or usage */
    KVV_EXIT_NOTHING = 77,    /* nothing could be checked */
    KVV_EXIT_INTERRUPTED = 130 /* stopped by SIGINT or SIGTERM (128 + SIGINT, as a shell
                                  says): the reports hold what finished */
};

#endif
