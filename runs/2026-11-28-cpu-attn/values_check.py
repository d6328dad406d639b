# attention's values on the CPU (no local memory): probabilities over the keys so far (a symbolic count) times the values, a
# reduce that stays a loop; the heuristics upcast the values' contiguous dim twice (16 outputs along it, the probabilities a
# scalar a step) and no second axis, whose rows a thread would load one strided scalar each a step; the result equals numpy's
import numpy as np
from tinygrad import Tensor, Device, Variable
from tinygrad.codegen.opt.heuristic import hand_coded_optimizations
from tinygrad.codegen.opt.postrange import Scheduler
H, Q, LM, D, n = 4, 32, 512, 64, 157
rng = np.random.default_rng(0)
pn, vn = rng.standard_normal((H, Q, LM)).astype(np.float32), rng.standard_normal((LM, D)).astype(np.float32)
p, v = Tensor(pn).realize(), Tensor(vn).realize()
L = Variable("L", 1, LM).bind(n)
k = Scheduler((p[:, :, :L] @ v[:L]).linear_with_vars()[0].src[-1].src[0], Device["CPU"].renderer)
k.convert_loop_to_global()
opt = hand_coded_optimizations(k)
up = [o for o in opt.applied_opts if o.op.name == "UPCAST"]
assert len(up) == 2 and up[0].axis == up[1].axis and up[0].arg * up[1].arg == 16, opt.applied_opts
got = (p[:, :, :L] @ v[:L]).numpy()
ref = pn[:, :, :n].astype(np.float64) @ vn[:n].astype(np.float64)
assert np.abs(got - ref).max() < 1e-4 * np.abs(ref).max(), np.abs(got - ref).max()
print("ok")
