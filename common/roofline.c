/*
 * roofline.c — the machine's sgemm rate and streaming read bandwidth
 * (roofline.h).
 */
#include "common/roofline.h"

#include <cblas.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/clock.h"

void kvv_roofline_probe(int threads, kvv_roofline *out)
{
    threads = threads < 1 ? 1 : threads > 64 ? 64 : threads;
    double sink = 0;
    out->threads = threads;
    out->read_gbs = 0;
    for (int p = 0; p < KVV_ROOFLINE_READ_PASSES; p++) {
        double g = kvv_roofline_read_gbs(threads, &sink);
        out->read_gbs = g > out->read_gbs ? g : out->read_gbs;
    }
    out->sgemm_gflops = kvv_roofline_sgemm_gflops(threads);
    if (sink < 0) /* never: the sums are unsigned; keeps them alive */
        out->read_gbs = 0;
}

double kvv_roofline_sgemm_gflops(int threads)
{
    const int M = 128, N = 1536, K = 576;
    float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * N * K);
    float *C = malloc(sizeof(float) * M * N);
    double best = 0;
    if (A && B && C) {
        for (int i = 0; i < M * K; i++)
            A[i] = (float)(i % 13) * 0.01f;
        for (int i = 0; i < N * K; i++)
            B[i] = (float)(i % 7) * 0.01f;
        openblas_set_num_threads(threads);
        for (int r = 0; r < 10; r++) {
            double t0 = kvv_now_seconds();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, A, K, B, K,
                        0.0f, C, N);
            double t = kvv_now_seconds() - t0;
            if (t > 0 && 2.0 * M * N * K / t * 1e-9 > best)
                best = 2.0 * M * N * K / t * 1e-9;
        }
        openblas_set_num_threads(1);
    }
    free(A);
    free(B);
    free(C);
    return best;
}

static uint64_t *read_buf;

typedef struct {
    const uint64_t *p;
    size_t n;       /* 64-bit words */
    uint64_t sum;
} read_share;

/* Four independent integer sums over the share: integer adds keep up with
 * any memory, and the compiler may vectorise them (the order of integer
 * additions does not change the result). */
static void *read_worker(void *arg)
{
    read_share *s = arg;
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (size_t i = 0; i + 4 <= s->n; i += 4) {
        a += s->p[i];
        b += s->p[i + 1];
        c += s->p[i + 2];
        d += s->p[i + 3];
    }
    s->sum = a + b + c + d;
    return NULL;
}

double kvv_roofline_read_gbs(int threads, double *sink)
{
    const size_t words = KVV_ROOFLINE_READ_BYTES / sizeof(uint64_t);
    if (threads < 1)
        threads = 1;
    if (threads > 64)
        threads = 64;
    if (!read_buf) {
        read_buf = malloc(KVV_ROOFLINE_READ_BYTES);
        if (!read_buf)
            return 0;
        for (size_t i = 0; i < words; i++)
            read_buf[i] = i * 0x9E3779B97F4A7C15ull;
    }
    read_share sh[64];
    pthread_t tid[64];
    size_t per = words / (size_t)threads / 4 * 4;
    for (int t = 0; t < threads; t++)
        sh[t] = (read_share){read_buf + (size_t)t * per, per, 0};
    double t0 = kvv_now_seconds();
    int started = 0;
    for (int t = 1; t < threads; t++)
        if (pthread_create(&tid[t], NULL, read_worker, &sh[t]) == 0)
            started = t;
        else
            break;
    read_worker(&sh[0]);
    for (int t = 1; t <= started; t++)
        pthread_join(tid[t], NULL);
    double dt = kvv_now_seconds() - t0;
    for (int t = 0; t <= started; t++)
        *sink += (double)(sh[t].sum & 0xffff);
    return dt > 0 ? (double)per * (size_t)(started + 1) * sizeof(uint64_t) / dt * 1e-9 : 0;
}

void kvv_roofline_free(void)
{
    free(read_buf);
    read_buf = NULL;
}
