/*
 * fuzz_kvv.c — libFuzzer target for the .kvv reader (vectors/kvv_file.h) and
 * the metadata parser on top of it (vectors/kvv_meta.h).
 *
 *   make fuzz                      # clang + libFuzzer, runs each target briefly
 *   build/tests/fuzz/replay_fuzz_kvv tests/fuzz/corpus/kvv   # inside make test
 *
 * Any input must give KVV_OK or a clean error (never a crash, leak or
 * undefined behaviour); on success every record's bytes are read in full so
 * the sanitizers see any out-of-bounds access.
 */
#include <stddef.h>
#include <stdint.h>

#include "vectors/kvv_file.h"
#include "vectors/kvv_meta.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kvv_file *f = NULL;
    kvv_error err = {0};
    if (kvv_file_read_memory(data, size, "fuzz.kvv", &f, &err) != KVV_OK)
        return 0;
    uint64_t sum = 0;
    for (int i = 0; i < f->n_records; i++)
        for (uint64_t j = 0; j < f->records[i].raw_size; j++)
            sum += f->records[i].data[j];
    kvv_meta m;
    if (kvv_meta_parse(f, &m, &err) == KVV_OK)
        kvv_meta_free(&m);
    kvv_file_free(f);
    return (int)(sum & 0);
}
