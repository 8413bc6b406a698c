/*
 * atomic_file.h — the one way kvverify writes a report file (JSON, JUnit,
 * HTML, .kvv): the bytes go to PATH.tmp.PID beside the target, are flushed
 * and closed, and the temp file is renamed over PATH. A reader therefore
 * sees either the old file or the whole new one — never half a report —
 * and a run killed mid-write leaves at most a PATH.tmp.PID behind, never a
 * truncated PATH. On every error path the temp file is removed and an
 * existing PATH is left untouched.
 *
 *   if (kvv_write_file_atomic("r.json", text, strlen(text), &err)) ...
 *
 * The path "-" means standard output (the command line's convention,
 * cli/output_opts.h): written and flushed there, nothing renamed.
 */
#ifndef KVV_ATOMIC_FILE_H
#define KVV_ATOMIC_FILE_H

#include <stddef.h>

#include "model/error.h"

/* Write len bytes of data to path atomically (see above).
 * @return KVV_OK, KVV_ERR_NOMEM, or KVV_ERR_IO naming the file and the
 * reason. */
kvv_status kvv_write_file_atomic(const char *path, const void *data, size_t len,
                                 kvv_error *err);

/* The temp name kvv_write_file_atomic uses for path: "PATH.tmp.PID" into
 * buf[size]. @return false when it does not fit. */
int kvv_atomic_temp_name(const char *path, char *buf, size_t size);

#endif
