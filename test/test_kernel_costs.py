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

GENERATED = """
import os; os.environ["NULL_ALLOW_COPYOUT"] = "1"
import bench_block as bb
from tools import kernel_costs as kc
from tinygrad.uop.ops import Ops
m = bb.load_model(bb.resolve_model("youtu-llm-2b-tiny"), 64, bb.DEFAULT_SPLIT_MASK, kernels="generated")
bench = bb.Bench(m, 8, 1)
kc._generated = True
kc.stack_ms(bench, set(), 1, 1)
def programs():
  step = bench.step("stack")
  bb.warm(step, extra=0)
  return [c.src[0] for c in bb.program_calls(bb.jit_of(step)) if c.src[0].op is Ops.PROGRAM]
names = {p.arg.name for p in programs()}
some = set(sorted(names)[::2])
for hollow in (some, set()):
  kc.hollow(hollow)
  for p in programs():
    body = next(u.arg for u in p.src if u.op is Ops.SOURCE).split('extern "C" __global__ void')[1]
    print(int(p.arg.name in hollow), int("=" in body), len(p.arg.global_size))
"""

@needs_nvcc
def test_generated_kernels_are_hollowed_and_restored():
  # tinygrad's own kernels: the named families' programs are swapped for hollow ones (no assignment in the body: it only waits
  # on its grid), the rest as lowered, and an empty set restores every one
  rows = [tuple(map(int, l.split())) for l in run_nvcc_script(GENERATED).splitlines() if l.strip()]
  assert len(rows) >= 2 * 60, len(rows)
  half = len(rows) // 2
  assert any(h for h, _, _ in rows[:half]) and not all(h for h, _, _ in rows[:half])
  for hollowed, work, _ in rows: assert work == (0 if hollowed else 1), rows
  assert not any(h for h, _, _ in rows[half:])
