from tinygrad import Tensor, UOp, Device
from tinygrad.codegen.opt.heuristic import hand_coded_optimizations
from tinygrad.codegen.opt.postrange import Scheduler
T, H, C, N = 16, 2, 32, 64
S = UOp.variable("S", 1, N).bind(17)
out = Tensor.empty(T, H, C).transpose(0, 1) @ Tensor.empty(N, C)[:S].T
ast = out.linear_with_vars()[0].src[-1].src[0]
k = Scheduler(ast, Device[Device.DEFAULT].renderer); k.convert_loop_to_global()
print(hand_coded_optimizations(k).applied_opts)
