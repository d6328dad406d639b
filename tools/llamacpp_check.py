"""llama.cpp (llama-cpp-python, CPU, f32 KV cache) against the committed transformers goldens, like tools.gpu_check
does for our GPU path: relative logit error through the golden's sketch and how many greedy tokens match. It tells how far
llama.cpp's own arithmetic (it rounds x to Q8_0 for its Q4_0/Q8_0 products) moves the test models, the yardstick for ours.

  ./run python -m tools.llamacpp_check [MIX]        (needs requirements-ref.txt; MIX default: release)
"""
import sys
import numpy as np
import apps  # noqa: F401
from apps import synth
from tools.make_model_goldens import CASES, N_GREEDY, load_golden, sketch_matrix
from tools.references import llamacpp, llamacpp_logits, llamacpp_greedy

def main() -> None:
  mix = sys.argv[1] if len(sys.argv) > 1 else "release"
  print(f"{'case':34s} {'prompt33':>9s} {'decode':>9s} {'greedy':>7s}")
  for preset, m in CASES:
    if m != mix: continue
    _, gold = load_golden(preset, m)
    llm = llamacpp(str(synth.generate(preset, m, progress=False)))
    ids, n = gold["continue/ids"].tolist(), len(gold["prompt33/ids"])
    logits = llamacpp_logits(llm, ids)
    S, ref = sketch_matrix(logits.shape[1]), gold["continue/hf_sketch"]
    err = lambda a, b: float(np.linalg.norm(a @ S - b) / np.linalg.norm(b))
    greedy = llamacpp_greedy(llm, gold["greedy/prompt"].tolist(), N_GREEDY)
    same = next((i for i, (a, b) in enumerate(zip(greedy, gold["greedy/hf"].tolist())) if a != b), N_GREEDY)
    print(f"{preset + '/' + m:34s} {err(logits[:n], ref[:n]):9.2e} {err(logits[n:], ref[n:]):9.2e} {same:4d}/{N_GREEDY}", flush=True)
    del llm

if __name__ == "__main__": main()
