# run locally before run_apps.sh / run_sym.sh / run_fill.sh (the GPU machine has no git history): A/quantized.py =
# apps/quantized.py as committed, B/quantized.py = with block-products.diff (the generated path's Q4_0 / Q8_0 chunk products as
# int8 block products); the checkout is left with the diff applied (its tests included) unless KEEP=A
cd "$(dirname "$0")/../.." && mkdir -p runs/2026-11-28-int8-tc/A runs/2026-11-28-int8-tc/B
git show HEAD:apps/quantized.py > runs/2026-11-28-int8-tc/A/quantized.py
git apply runs/2026-11-28-int8-tc/block-products.diff && cp apps/quantized.py runs/2026-11-28-int8-tc/B/quantized.py
[ "${KEEP:-B}" = A ] && git apply -R runs/2026-11-28-int8-tc/block-products.diff
