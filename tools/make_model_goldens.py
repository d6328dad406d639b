"""Regenerate test/goldens/model_*.npz from the live references (transformers; llama.cpp for the F32 files).

  ./run pip install -r requirements-ref.txt     # once: torch 2.13.0 (CPU), transformers, llama-cpp-python from the PyPI sdist
  ./run python -m tools.make_model_goldens      # ~minutes on 2 cores
  ./run python -m tools.make_model_goldens --long   # test/goldens/long_*.npz: a 4,224-token prompt, and the fp16 cache

For each tiny preset and mix (f32, q8_0, release) it stores, per test sequence, a 64-column sketch of the reference logits
(logits @ S, S a fixed +-1/8 hash matrix, so ||(ours - ref) S|| / ||ref S|| estimates the full relative error), the top-8
ids per position, and for the F32 files llama.cpp's sketch and the greedy continuations of both references. The file's
sha256 is recorded so a changed generator makes the goldens visibly stale. CI needs neither torch nor llama.cpp.
"""
from __future__ import annotations
import hashlib, json, time
from pathlib import Path
import numpy as np
import apps  # noqa: F401
from apps import synth
from tools import references as ref

GOLDENS = Path(__file__).resolve().parent.parent / "test" / "goldens"
PRESETS = ("deepseek-v2-lite-tiny", "glm-4.7-flash-tiny", "youtu-llm-2b-tiny")
MIXES = ("f32", "q8_0", "release")
PROMPT_LENS = (1, 7, 33)
N_CONTINUE = 8    # decode steps fed one at a time after the 33-token prompt
N_GREEDY = 32
SKETCH = 64
# the (preset, mix) of every committed golden (presets have no "_")
CASES = sorted(tuple(p.stem.removeprefix("model_").split("_", 1)) for p in GOLDENS.glob("model_*.npz"))

def sketch_matrix(vocab: int, k: int = SKETCH) -> np.ndarray:
  """(vocab, k) entries +-1/sqrt(k) from an integer hash: the same on every numpy version."""
  x = (np.arange(vocab, dtype=np.uint64)[:, None] * 0x9E3779B1 + np.arange(k, dtype=np.uint64)[None, :] * 0x85EBCA77 + 0x165667B1) & 0xFFFFFFFF
  x ^= x >> 15; x = (x * 0x2C1B3C6D) & 0xFFFFFFFF; x ^= x >> 12; x = (x * 0x297A2D39) & 0xFFFFFFFF; x ^= x >> 15  # noqa: E702
  return np.where(x & 1, 1.0, -1.0) / np.sqrt(k)

def load_golden(preset: str, mix: str) -> tuple[dict, dict]:
  """(meta, arrays) of test/goldens/model_<preset>_<mix>.npz."""
  g = np.load(GOLDENS / f"model_{preset}_{mix}.npz")
  return json.loads(bytes(g["meta"]).decode()), {k: g[k] for k in g.files if k != "meta"}

def rel_err(ours: np.ndarray, ref_sketch: np.ndarray, S: np.ndarray) -> float:
  """||(ours - ref) S|| / ||ref S||: ours (T, vocab) against the golden's sketch of the reference logits."""
  return float(np.linalg.norm(ours.astype(np.float64) @ S - ref_sketch) / np.linalg.norm(ref_sketch))

def sequences(vocab_real: int) -> dict[str, list[int]]:
  """Deterministic token sequences over the real (non-padding) vocabulary."""
  rng = np.random.default_rng(20261122)
  seqs = {f"prompt{n}": rng.integers(0, vocab_real, n).tolist() for n in PROMPT_LENS}
  seqs["continue"] = seqs[f"prompt{PROMPT_LENS[-1]}"] + rng.integers(0, vocab_real, N_CONTINUE).tolist()
  return seqs

def main() -> None:
  import torch, transformers, llama_cpp, gguf
  versions = {"torch": torch.__version__, "transformers": transformers.__version__, "llama_cpp": llama_cpp.__version__,
              "gguf": getattr(gguf, "__version__", "?"), "numpy": np.__version__}
  print(versions)
  for preset in PRESETS:
    for mix in MIXES:
      t0 = time.perf_counter()
      path = synth.generate(preset, mix, progress=False)
      sha = hashlib.sha256(path.read_bytes()).hexdigest()
      model = ref.hf_model(str(path))
      vocab = model.config.vocab_size
      S = sketch_matrix(vocab)
      seqs = sequences(min(vocab, 100000))
      out: dict[str, np.ndarray] = {}
      for name, ids in seqs.items():
        logits = ref.hf_logits(model, ids)
        out[f"{name}/ids"] = np.array(ids, np.int32)
        out[f"{name}/hf_sketch"] = (logits @ S).astype(np.float64)
        out[f"{name}/hf_top8"] = np.argsort(-logits, axis=-1)[:, :8].astype(np.int32)
      greedy_prompt = seqs["prompt7"]
      out["greedy/prompt"] = np.array(greedy_prompt, np.int32)
      out["greedy/hf"] = np.array(ref.hf_greedy(model, greedy_prompt, N_GREEDY), np.int32)
      if mix == "f32":
        llm = ref.llamacpp(str(path))
        for name, ids in seqs.items():
          out[f"{name}/llamacpp_sketch"] = ref.llamacpp_logits(llm, ids) @ S
        out["greedy/llamacpp"] = np.array(ref.llamacpp_greedy(llm, greedy_prompt, N_GREEDY), np.int32)
        # how close the two references are to each other (recorded, not asserted here)
        d = out["continue/llamacpp_sketch"] - out["continue/hf_sketch"]
        versions_note = float(np.linalg.norm(d) / np.linalg.norm(out["continue/hf_sketch"]))
        print(f"  llama.cpp vs transformers on {preset}/f32: sketch rel err {versions_note:.2e}, "
              f"greedy equal: {out['greedy/llamacpp'].tolist() == out['greedy/hf'].tolist()}")
        del llm
      meta = {"preset": preset, "mix": mix, "sha256": sha, "versions": versions, "sketch": SKETCH}
      out["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
      GOLDENS.mkdir(parents=True, exist_ok=True)
      np.savez_compressed(GOLDENS / f"model_{preset}_{mix}.npz", **out)
      print(f"{preset}/{mix}: {time.perf_counter() - t0:.1f} s")

# ---------------------------------------------------------------- a long prompt, and the fp16 cache

LONG_CASE = ("glm-4.7-flash-tiny", "f32")   # F32: llama.cpp's logits are comparable (no quantized activations)
LONG_N, LONG_ROWS, LONG_SEED = 4224, 8, 7   # past 4096: eight chunks of 512, then 128s; the last rows compared (path_check.window)

def long_golden_path() -> Path: return GOLDENS / f"long_{LONG_CASE[0]}_{LONG_CASE[1]}.npz"

def long_goldens() -> None:
  """test/goldens/long_<case>.npz: the last LONG_ROWS rows of a LONG_N-token prompt from transformers and from llama.cpp
  (f32 cache), sketched; and a 33-token prompt's logits from llama.cpp with its default fp16 cache beside its f32 one, for
  `--cache-type f16`."""
  import torch, transformers, llama_cpp
  from tools.path_check import window
  preset, mix = LONG_CASE
  path = synth.generate(preset, mix, progress=False)
  model = ref.hf_model(str(path))
  vocab = model.config.vocab_size
  S = sketch_matrix(vocab)
  ids = window(vocab, LONG_N, LONG_SEED)
  out: dict[str, np.ndarray] = {"long/ids": np.array(ids, np.int32)}
  with torch.no_grad(): hf = model(torch.tensor([ids]), logits_to_keep=LONG_ROWS).logits[0].numpy()
  out["long/hf_sketch"], out["long/hf_top8"] = hf @ S, np.argsort(-hf, axis=-1)[:, :8].astype(np.int32)
  llm = ref.llamacpp(str(path), n_ctx=LONG_N)
  out["long/llamacpp_sketch"] = ref.llamacpp_logits(llm, ids)[-LONG_ROWS:] @ S
  del llm
  short = sequences(min(vocab, 100000))["prompt33"]
  out["f16/ids"] = np.array(short, np.int32)
  for t, name in ((llama_cpp.GGML_TYPE_F32, "f32"), (llama_cpp.GGML_TYPE_F16, "f16")):
    llm = ref.llamacpp(str(path), kv_type=t)
    out[f"f16/llamacpp_{name}_sketch"] = ref.llamacpp_logits(llm, short) @ S
    del llm
  for k in ("long/llamacpp_sketch", "f16/llamacpp_f16_sketch"):
    base = out["long/hf_sketch"] if k.startswith("long") else out["f16/llamacpp_f32_sketch"]
    print(f"  {k} against {'transformers' if k.startswith('long') else 'its f32 cache'}: {np.linalg.norm(out[k] - base) / np.linalg.norm(base):.2e}")
  meta = {"preset": preset, "mix": mix, "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "sketch": SKETCH,
          "versions": {"torch": torch.__version__, "transformers": transformers.__version__, "llama_cpp": llama_cpp.__version__}}
  out["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
  np.savez_compressed(long_golden_path(), **out)

if __name__ == "__main__":
  import sys
  long_goldens() if sys.argv[1:] == ["--long"] else main()
