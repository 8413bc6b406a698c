#!/bin/sh
# The kernel tests can fail, and their "CPU lacks it" path runs here too.
#  - $O/tests/plant/cpu_kernels_hsum_swap is test_cpu_kernels linked with an
#    AVX-512 table whose reduction tree has two lanes exchanged
#    (KVV_CPU_PLANT_HSUM_SWAP; built by `make test`, never part of
#    ./kvverify). Its kernels stay consistent with each other, so only the
#    order check (K1) and the native/emulated comparison can see it: it must
#    fail, both on this CPU and with KVV_CPU_MAX_ISA=avx2 (as on a CPU
#    without AVX-512, where only the emulated table runs).
#  - $O/tests/plant/cpu_kquant_order_swap is test_cpu_kquant_kernels (K10)
#    linked with an AVX2 K-quant build whose two float steps per super-block
#    run in the other order (KVV_CPU_PLANT_KQ_ORDER): its GEMV and GEMM agree
#    with each other, only the order check can see it: it must fail.
#  - the real test_cpu_kernels passes with every SIMD table emulated only
#    (KVV_CPU_MAX_ISA=generic) and says so.
# Exit 0 pass, else fail.
. "$(dirname "$0")/lib.sh"
O=${O:-build}
PLANT=$O/tests/plant/cpu_kernels_hsum_swap
PLANT_KQ=$O/tests/plant/cpu_kquant_order_swap
KERN=$O/tests/engine/test_cpu_kernels
KERN_KQ=$O/tests/engine/test_cpu_kquant_kernels
tmp="$O/tmp/test_kernel_plant.$$"
mkdir -p "$tmp" || exit 1
trap 'rm -rf "$tmp"' EXIT
for f in "$PLANT" "$PLANT_KQ" "$KERN" "$KERN_KQ"; do
    [ -x "$f" ] || { echo "FAIL: $f not built (make test builds it)"; exit 1; }
done

for cap in "" avx2; do
    KVV_CPU_MAX_ISA=$cap "$PLANT" >"$tmp/out" 2>&1 && fail "planted lane swap passed (KVV_CPU_MAX_ISA=$cap)"
    # the order check names the planted table; nothing crashed
    grep -q 'avx512 (emulated): .* vs the order' "$tmp/out" ||
        { fail "planted lane swap not caught by the order check (KVV_CPU_MAX_ISA=$cap)"; tail -n 20 "$tmp/out"; }
    grep -q 'FAILED  \] test_order' "$tmp/out" || fail "test_order did not fail (KVV_CPU_MAX_ISA=$cap)"
    echo "planted (KVV_CPU_MAX_ISA=${cap:-unset}): $(grep -m1 'vs the order' "$tmp/out")"
done
# where this CPU runs AVX-512 natively, the emulated table disagrees with it too
if KVV_CPU_MAX_ISA= "$KERN" 2>&1 | grep -q 'avx512 (native'; then
    KVV_CPU_MAX_ISA= "$PLANT" >"$tmp/out" 2>&1
    grep -q 'avx512: .* native .*, emulated' "$tmp/out" ||
        fail "native/emulated comparison did not catch the planted swap"
fi

# K10: the planted K-quant order is caught by the order check, with and
# without the native tables
for cap in "" generic; do
    KVV_CPU_MAX_ISA=$cap "$PLANT_KQ" >"$tmp/out" 2>&1 && fail "planted K-quant order passed (KVV_CPU_MAX_ISA=$cap)"
    grep -q 'avx2 (emulated): gemm_kq .*vs the order' "$tmp/out" ||
        { fail "planted K-quant order not caught (KVV_CPU_MAX_ISA=$cap)"; tail -n 20 "$tmp/out"; }
    echo "planted K-quant order (KVV_CPU_MAX_ISA=${cap:-unset}): $(grep -m1 'vs the order' "$tmp/out")"
done
KVV_CPU_MAX_ISA=generic "$KERN_KQ" >"$tmp/out" 2>&1 || { fail "K-quant kernel tests fail with KVV_CPU_MAX_ISA=generic"; tail -n 20 "$tmp/out"; }

# the "CPU lacks it" path: every SIMD table emulated only, all contracts hold
KVV_CPU_MAX_ISA=generic "$KERN" >"$tmp/out" 2>&1 || { fail "kernel tests fail with KVV_CPU_MAX_ISA=generic"; tail -n 20 "$tmp/out"; }
grep -q '^tables: generic (native), avx2 (emulated), avx512 (emulated)$' "$tmp/out" ||
    fail "KVV_CPU_MAX_ISA=generic: tables line wrong: $(grep tables: "$tmp/out")"
grep '^tables:' "$tmp/out"
KVV_CPU_MAX_ISA=avx2 "$KERN" >"$tmp/out" 2>&1 || fail "kernel tests fail with KVV_CPU_MAX_ISA=avx2"
grep -q ', avx512 (emulated)$' "$tmp/out" || fail "KVV_CPU_MAX_ISA=avx2: avx512 not emulated only"
grep '^tables:' "$tmp/out"
# a cap that names no table is refused, not ignored
KVV_CPU_MAX_ISA=avx9000 "$KERN" >"$tmp/out" 2>&1 && fail "KVV_CPU_MAX_ISA=avx9000 accepted"
grep -q "KVV_CPU_MAX_ISA='avx9000'" "$tmp/out" || fail "KVV_CPU_MAX_ISA=avx9000: no message"

[ $fails -eq 0 ] || exit 1
echo "ok"
