/* catalog.c — the one table of checks (see catalog.h). */
#include "verify/catalog.h"

#include <string.h>

#include "verify/batch.h"
#include "verify/compare.h"
#include "verify/greedy.h"
#include "verify/invariance.h"
#include "verify/kv.h"
#include "verify/kvdirect.h"
#include "verify/patch.h"
#include "verify/tables.h"

/* The audit's checks first, in the order they are reported; then the
 * checks with a command of their own. */
static const kvv_check_entry checks[] = {
    {"kv", "kvverify kv MODEL",
     "the K/V in the cache equal, bit for bit, K/V recomputed from the residual stream "
     "entering each layer: token by token, all at once and in chunks",
     "one flipped bit in a cached K must be found exactly there; a recompute summing in "
     "reversed order must differ", true,
     kvv_check_kv, "cached K/V bit-equal to K/V recomputed from residuals",
     0, 5},
    {"patch", "kvverify patch MODEL",
     "overwriting run B's residual stream with run A's at any layer gives A's logits bit for "
     "bit: KL exactly 0 at every layer (the residual is the whole state)",
     "patching only the last position must leave KL > 0", true,
     kvv_check_patch, "residual patching at every layer gives KL exactly 0",
     0, 3},
    {"greedy", "kvverify greedy MODEL",
     "decoding with the cache and without it (the whole sequence recomputed every step) "
     "gives the same tokens and bit-identical logits at every step",
     "a cached decode with one perturbed weight (output_norm[0]) must differ", true,
     kvv_check_greedy, "cached and cache-free greedy decoding agree bit for bit",
     0, 1},
    {"invariance", "kvverify invariance MODEL",
     "chunkings, prefill then decode, and thread counts give the same K, V, residuals and "
     "logits as one call over the whole prompt",
     "one flipped residual bit during a chunked run must be found", true,
     kvv_check_invariance, "chunking, decode and threads do not change any bit",
     0, 4},
    {"kvdirect", "kvverify audit MODEL --checks kvdirect",
     "KV-Direct (live K/V for a budget, residual checkpoints for the evicted tokens, "
     "their K/V recomputed on demand) decodes bit-equal to the full cache",
     "bf16 (approximate) checkpoints must change the logits", true,
     kvv_check_kvdirect, "KV-Direct (residual checkpoints) decodes bit-equal to the full cache",
     0, 2},
    {"compare", "kvverify compare MODEL --engine A --against B",
     "engine B (the engine under test) agrees with engine A per layer and on the logits "
     "within --tol (ULP, NMSE, KL, top-1)",
     "one logit of B moved by twice --tol (and, layer by layer, B's residual by 3 x the "
     "layer tolerance) must make the verdict FAIL", true,
     kvv_check_compare, "the engine against the reference (the reference against the cpu engine "
     "when it is the engine) per layer and on logits",
     0, 5},
    {"batch", "kvverify batch MODEL",
     "a request gives the same logits and K/V bits alone and among other requests sharing "
     "the forward calls: prompts of other lengths (single), decode steps of 1, 2 and k "
     "tokens (decode), a prompt among decode tokens (mixed), a copied prefix (prefix), and "
     "neighbours of other content (isolation: a difference is a leak)",
     "A's last prompt token changed in the shared call must be found", true,
     kvv_check_batch, "request A alone and among other requests sharing the calls: the same bits",
     0, 2},
    {"tables", "kvverify audit MODEL --engine cpu --checks tables",
     "the cpu engine's invariant mode is bit-exact with every kernel table this CPU runs "
     "(generic, avx2, avx512), each checked by the invariance check; and every pair of "
     "tables, layer by layer, differs by no more than the kernels' contract allows for the "
     "model's tensor types (summation order: 2·n·γ_K; 8-bit activations: one rounding)",
     "each table's run flips one residual bit, which must be found; a residual and a logit "
     "planted past the bound must fail it; a build whose avx2 GEMM depends on the batch "
     "(KVV_CPU_PLANT_GEMM_TILE, tests/cli/test_isa.sh) must make the check FAIL for that "
     "table", true,
     kvv_check_tables, "cpu engine: invariance with each kernel table this CPU runs; the figures "
     "between tables",
     KVV_ENGINE_OPT_ISA, 0},
    {"evict", "kvverify evict MODEL",
     "KV-Direct stays bit-equal to the full cache where eviction policies (window, "
     "StreamingLLM, H2O, TOVA, SnapKV, ...) at equal bytes lose tokens; the baselines' "
     "match rates are figures, KV-Direct's equality the verdict",
     "KV-Direct with bf16 checkpoints must differ", true,
     NULL, NULL, 0, 0},
    {"memory", "kvverify memory MODEL",
     "bytes held over a multi-turn conversation, full cache against KV-Direct, accounted "
     "exactly, with KV-Direct's tokens equal to the full cache's",
     "kvdirect-layer with bf16 checkpoints must differ", true,
     NULL, NULL, 0, 0},
    {"latency", "kvverify latency MODEL",
     "reading cached K/V against recomputing them from residuals, per layer and batch "
     "size, with bytes, FLOPs and the achieved rates (a table, no verdict); the recomputed "
     "K/V equal the cache's",
     "a residual changed by +1 before recomputing must change K/V", false,
     NULL, NULL, 0, 0},
    {"numerics", "kvverify numerics MODEL",
     "each engine's ops (matmul, norms, softmax, RoPE, activations) against MPFR's "
     "correctly rounded result on a forward pass's real inputs, in ULPs (figures); the "
     "verdict: the rebuilt inputs equal the forward pass's bit for bit",
     "a planted +1 ULP must be measured as exactly 1 ULP on every value; --force-fail flips "
     "one bit of a rebuilt input", true,
     NULL, NULL, 0, 0},
    {"vectors", "kvverify vectors check MODEL FILE.kvv",
     "an engine reproduces a golden vector (.kvv) bit for bit: tokens, logits, per-layer "
     "hashes of K, V and residuals",
     "--force-fail=resid:L:P flips one residual bit, --force-fail (weight) one weight: the "
     "check must diverge", true,
     NULL, NULL, 0, 0},
    {"serve-model", "kvverify serve URL --model F.gguf",
     "the server serves the GGUF: its vocabulary size and first-step logprobs can be the "
     "reference engine's on that file (checked first; the other serve checks need it)",
     "the server's answer with every token id shifted by one must be caught", true,
     NULL, NULL, 0, 0},
    {"serve-repeat", "kvverify serve URL --model F.gguf --checks serve-repeat",
     "the same greedy request sent N times, one at a time, gives the same tokens and "
     "bit-identical top-k logprobs",
     "one logprob of a copy changed by one ULP must be found", true,
     NULL, NULL, 0, 0},
    {"serve-concurrent", "kvverify serve URL --model F.gguf --checks serve-concurrent",
     "a request gives the same tokens and logprob bits alone and among other requests of "
     "other lengths in flight, sent at once or while they decode, round after round",
     "one logprob of a copy changed by one ULP must be found", true,
     NULL, NULL, 0, 0},
    {"serve-prefix", "kvverify serve URL --model F.gguf --checks serve-prefix",
     "prompt caching (cache_prompt) changes no bit: the request again, and after another "
     "request sharing its prefix, equals the request with the cache off",
     "one logprob of a copy changed by one ULP must be found", true,
     NULL, NULL, 0, 0},
    {"serve-reference", "kvverify serve URL --model F.gguf --checks serve-reference",
     "the server's greedy tokens equal kvverify's reference engine on the GGUF, with "
     "logprobs within --tol; a divergence at a near-tie (top-1/top-2 gap within twice the "
     "measured error) is told apart from a bug",
     "one logprob moved by 10 x --tol + 1 nats must fail the comparison", true,
     NULL, NULL, 0, 0},
};
#define N_CHECKS ((int)(sizeof checks / sizeof checks[0]))

const kvv_check_entry *kvv_check_catalog(int *n)
{
    *n = N_CHECKS;
    return checks;
}

const kvv_check_entry *kvv_audit_checks(int *n)
{
    int k = 0;
    while (k < N_CHECKS && checks[k].run)
        k++;
    *n = k;
    return checks;
}

const kvv_check_entry *kvv_audit_find(const char *name)
{
    int n;
    const kvv_check_entry *t = kvv_audit_checks(&n);
    for (int i = 0; i < n; i++)
        if (strcmp(t[i].name, name) == 0)
            return &t[i];
    return NULL;
}
