# run locally before run_apps.sh (the GPU machine has no git history): A = apps/quantized.py as committed, B = the checkout
# with block-products.diff applied (the generated path's Q4_0 / Q8_0 chunk products as int8 block products, and their tests)
cd "$(dirname "$0")/../.." && mkdir -p runs/2026-11-28-int8-tc/A && git show HEAD:apps/quantized.py > runs/2026-11-28-int8-tc/A/quantized.py
git apply runs/2026-11-28-int8-tc/block-products.diff
