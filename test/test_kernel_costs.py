"""tools/kernel_costs.py: its numbers mean something only if hollowing reaches every hand-written kernel of the stack.
(A first version missed the matvecs behind quantized.py's cache of kernel bodies and reported their cost as a floor.)"""
from nvcc import needs_nvcc, run_nvcc_script

SCRIPT = """
import os; os.environ["NULL_ALLOW_COPYOUT"] = "1"
import bench_block as bb
from tools import kernel_costs as kc
from tinygrad.uop.ops import Ops
m = bb.load_model(bb.resolve_model("youtu-llm-2b-tiny"), 64, bb.DEFAULT_SPLIT_MASK)
bench = bb.Bench(m, 8, 1)
kc.stack_ms(bench, set(), 1, 1)
hand = set(kc._seen)
kc.hollow(hand)
step = bench.step("stack")
bb.warm(step, extra=0)
for c in bb.program_calls(bb.jit_of(step)):
  p = c.src[0]
  src = next(u.arg for u in p.src if u.op is Ops.SOURCE)
  print(p.arg.name, p.arg.name in hand, tuple(p.arg.global_size), "weights" if kc.read_bytes(c) else "-", len(src))
"""

@needs_nvcc
def test_every_hand_written_kernel_is_hollowed():
  rows = [l.split() for l in run_nvcc_script(SCRIPT).splitlines() if l.strip()]
  hand = [r for r in rows if r[1] == "True"]
  names = {r[0] for r in hand}
  assert any(n.startswith("mv_") for n in names) and any(n.startswith("mla_attend") for n in names), names
  assert len(hand) >= 8 * 2, rows  # 9 hand-written kernels per Youtu block
  for r in hand: assert r[2] == "(1," and r[3] == "1," and r[4] == "1)", r  # one workgroup: the hollow kernel
