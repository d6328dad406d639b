"""The flash prefill kernel (runs/2026-12-01-gen/experiments/prefill-flash-expanded.diff) at depth on the CPU emulator
(test/emulator.py: its CUDA source compiled for the host), against float64: one head of DeepSeek-V2-Lite's shape (192-wide
keys, 128-wide values), 16 queries at the end of 512 / 4096 / 16384 keys, N(0, 1) data. On the H200 the bench put it ~1e-4
(max-abs) from the tensor ops' attention at 16k keys; this says which side.
  in a tree with the diff applied: PYTHONPATH=.:upstream python3 runs/2026-12-02-flash/emulate_depth.py   (~100 s)"""
import sys, time
from pathlib import Path
import tempfile
sys.path[:0] = [".", "test"]
from test_kernels_attention import flash_case, numpy_flash, emulate_flash, rel_err

for P in (496, 4080, 16368):
  t = time.time()
  c = flash_case(1, 192, 128, P, 16, P + 16, seed=1)
  with tempfile.TemporaryDirectory() as w: out = emulate_flash(c, Path(w))
  print(f"{P + 16} keys: max-abs error over float64's max-abs {rel_err(out, numpy_flash(c)):.1e} ({time.time() - t:.0f} s)", flush=True)
