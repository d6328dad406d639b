from tinygrad import Tensor, UOp
from tinygrad.codegen.opt.heuristic import hand_coded_optimizations
from tinygrad.codegen.opt.postrange import Scheduler
from tinygrad.renderer.cstyle import NVCCRenderer
from tinygrad.helpers import Target
def opts(out):
  ast = out.linear_with_vars()[0].src[-1].src[0]
  k = Scheduler(ast, NVCCRenderer(Target(device="CUDA", arch="sm_90")))
  k.convert_loop_to_global()
  return hand_coded_optimizations(k).applied_opts
T, H, C = 512, 16, 576
S = UOp.variable("S", 1, 4608).bind(512)
cache = Tensor.empty(4608, C, device="NULL")
q = Tensor.empty(T, H, C, device="NULL")
print("plain q, symbolic S:", opts(q.transpose(0, 1) @ cache[:S].T))
print("plain q, S=512:", opts(q.transpose(0, 1) @ cache[:512].T))
a, b = Tensor.empty(T, H, 512, device="NULL"), Tensor.empty(T, H, 64, device="NULL")
print("cat q, S=512:", opts(a.cat(b, dim=-1).transpose(0, 1) @ cache[:512].T))
print("2d matmul:", opts(Tensor.empty(1024, 576, device="NULL") @ Tensor.empty(576, 512, device="NULL")))
