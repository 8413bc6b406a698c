/* catalog.c — what each check proves and its control (see catalog.h). */
#include "verify/catalog.h"

static const kvv_check_about about[] = {
    {"kv", "kvverify kv MODEL",
     "the K/V in the cache equal, bit for bit, K/V recomputed from the residual stream "
     "entering each layer: token by token, all at once and in chunks",
     "one flipped bit in a cached K must be found exactly there; a recompute summing in "
     "reversed order must differ", true},
    {"patch", "kvverify patch MODEL",
     "overwriting run B's residual stream with run A's at any layer gives A's logits bit for "
     "bit: KL exactly 0 at every layer (the residual is the whole state)",
     "patching only the last position must leave KL > 0", true},
    {"greedy", "kvverify greedy MODEL",
     "decoding with the cache and without it (the whole sequence recomputed every step) "
     "gives the same tokens and bit-identical logits at every step",
     "a cached decode with one perturbed weight (output_norm[0]) must differ", true},
    {"invariance", "kvverify invariance MODEL",
     "chunkings, prefill then decode, and thread counts give the same K, V, residuals and "
     "logits as one call over the whole prompt",
     "one flipped residual bit during a chunked run must be found", true},
    {"kvdirect", "kvverify audit MODEL --checks kvdirect",
     "KV-Direct (live K/V for a budget, residual checkpoints for the evicted tokens, "
     "their K/V recomputed on demand) decodes bit-equal to the full cache",
     "bf16 (approximate) checkpoints must change the logits", true},
    {"compare", "kvverify compare MODEL --engine A --against B",
     "engine B (the engine under test) agrees with engine A per layer and on the logits "
     "within --tol (ULP, NMSE, KL, top-1)",
     "one logit of B moved by twice --tol (and, layer by layer, B's residual by 3 x the "
     "layer tolerance) must make the verdict FAIL", true},
    {"tables", "kvverify audit MODEL --engine cpu --checks tables",
     "the cpu engine's invariant mode is bit-exact with every kernel table this CPU runs "
     "(generic, avx2, avx512), each checked by the invariance check; and every pair of "
     "tables, layer by layer, differs by no more than the kernels' contract allows for the "
     "model's tensor types (summation order: 2·n·γ_K; 8-bit activations: one rounding)",
     "each table's run flips one residual bit, which must be found; a residual and a logit "
     "planted past the bound must fail it; a build whose avx2 GEMM depends on the batch "
     "(KVV_CPU_PLANT_GEMM_TILE, tests/cli/test_isa.sh) must make the check FAIL for that "
     "table", true},
    {"evict", "kvverify evict MODEL",
     "KV-Direct stays bit-equal to the full cache where eviction policies (window, "
     "StreamingLLM, H2O, TOVA, SnapKV, ...) at equal bytes lose tokens; the baselines' "
     "match rates are figures, KV-Direct's equality the verdict",
     "KV-Direct with bf16 checkpoints must differ", true},
    {"memory", "kvverify memory MODEL",
     "bytes held over a multi-turn conversation, full cache against KV-Direct, accounted "
     "exactly, with KV-Direct's tokens equal to the full cache's",
     "kvdirect-layer with bf16 checkpoints must differ", true},
    {"latency", "kvverify latency MODEL",
     "reading cached K/V against recomputing them from residuals, per layer and batch "
     "size, with bytes, FLOPs and the achieved rates (a table, no verdict); the recomputed "
     "K/V equal the cache's",
     "a residual changed by +1 before recomputing must change K/V", false},
    {"numerics", "kvverify numerics MODEL",
     "each engine's ops (matmul, norms, softmax, RoPE, activations) against MPFR's "
     "correctly rounded result on a forward pass's real inputs, in ULPs (figures); the "
     "verdict: the rebuilt inputs equal the forward pass's bit for bit",
     "a planted +1 ULP must be measured as exactly 1 ULP on every value; --force-fail flips "
     "one bit of a rebuilt input", true},
    {"vectors", "kvverify vectors check MODEL FILE.kvv",
     "an engine reproduces a golden vector (.kvv) bit for bit: tokens, logits, per-layer "
     "hashes of K, V and residuals",
     "--force-fail=resid:L:P flips one residual bit, --force-fail (weight) one weight: the "
     "check must diverge", true},
    {"serve-model", "kvverify serve URL --model F.gguf",
     "the server serves the GGUF: its vocabulary size and first-step logprobs can be the "
     "reference engine's on that file (checked first; the other serve checks need it)",
     "the server's answer with every token id shifted by one must be caught", true},
    {"serve-repeat", "kvverify serve URL --model F.gguf --checks serve-repeat",
     "the same greedy request sent N times, one at a time, gives the same tokens and "
     "bit-identical top-k logprobs",
     "one logprob of a copy changed by one ULP must be found", true},
    {"serve-concurrent", "kvverify serve URL --model F.gguf --checks serve-concurrent",
     "a request gives the same tokens and logprob bits alone and among other requests of "
     "other lengths in flight, sent at once or while they decode, round after round",
     "one logprob of a copy changed by one ULP must be found", true},
    {"serve-prefix", "kvverify serve URL --model F.gguf --checks serve-prefix",
     "prompt caching (cache_prompt) changes no bit: the request again, and after another "
     "request sharing its prefix, equals the request with the cache off",
     "one logprob of a copy changed by one ULP must be found", true},
    {"serve-reference", "kvverify serve URL --model F.gguf --checks serve-reference",
     "the server's greedy tokens equal kvverify's reference engine on the GGUF, with "
     "logprobs within --tol; a divergence at a near-tie (top-1/top-2 gap within twice the "
     "measured error) is told apart from a bug",
     "one logprob moved by 10 x --tol + 1 nats must fail the comparison", true},
};

const kvv_check_about *kvv_check_catalog(int *n)
{
    *n = (int)(sizeof about / sizeof about[0]);
    return about;
}
