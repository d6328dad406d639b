"""patches/0069's unrolled walk at full size, without a GPU: GLM-4.7-Flash's attn_output product shape (2048 rows of 160
Q4_0-style blocks: a thread walks 5 blocks past its group's share) and a 5120-row product of 64 blocks (2 steps), with the
opts tinygrad's heuristics choose on a CUDA sm_90 renderer and on DEV=PYTHON (printed: the same), run on DEV=PYTHON (GPU-style
kernels with locals) against numpy (test_patches.py's Q4_MATVEC helpers).
  PYTHONPATH=.:upstream python3 runs/2026-12-01-gen/cpu/unrolled_products_full_size.py   (~6 min on 2 cores)"""
import sys, time
sys.path.insert(0, "test")
from test_patches import Q4_MATVEC
exec(Q4_MATVEC)
from tinygrad import Device

def python_opts(rows, blocks):
  out = q4_matvec(Tensor.empty(rows, blocks, 4, dtype=dtypes.uint32, device="PYTHON"),
                  Tensor.empty(rows, blocks, dtype=dtypes.half, device="PYTHON"), Tensor.empty(blocks, 32, device="PYTHON"))
  k = Scheduler(out.linear_with_vars()[0].src[-1].src[0], Device["PYTHON"].renderer)
  k.convert_loop_to_global()
  return hand_coded_optimizations(k).applied_opts

for rows, blocks in ((2048, 160), (5120, 64)):
  sm90, py = chosen_opts(rows, blocks), python_opts(rows, blocks)
  assert sm90 == py and sm90[-1].op is OptOps.UNROLL, (sm90, py)
  t = time.time()
  check_product(rows, blocks)
  print(f"{rows} x {blocks} blocks: opts {sm90}: equal to numpy ({time.time() - t:.0f} s)", flush=True)
