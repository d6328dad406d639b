"""Prove the synthetic GGUF files load in llama.cpp unchanged: each tiny preset x quant mix (and a tiny GLM with an MTP block) is
generated, loaded with llama-cpp-python (CPU, PyPI build), fed a chat-templated prompt, and its logits checked finite. The chat
template's special tokens must tokenize as single tokens with the ids apps.synth put them at.

  ./run python -m tools.check_llamacpp_load                # write test/goldens/llamacpp_load.json
  ./run python -m tools.check_llamacpp_load --check        # compare with the recorded file instead (exit 1 on a mismatch)
  ./run python -m tools.check_llamacpp_load --full deepseek-v2-lite --delete   # also load a full-size file (GBs), then delete it

test/test_synth.py runs check() live when llama_cpp is installed and checks the recorded file otherwise.
"""
from __future__ import annotations
import argparse, dataclasses, hashlib, json, sys, tempfile, time
from pathlib import Path
import numpy as np
import apps  # noqa: F401
from apps import synth

GOLDEN = Path(__file__).resolve().parent.parent / "test" / "goldens" / "llamacpp_load.json"
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello, who are you?"}]

def sha256(path: Path) -> str:
  h = hashlib.sha256()
  with open(path, "rb") as f:
    while chunk := f.read(1 << 24): h.update(chunk)
  return h.hexdigest()

def variants() -> list[tuple[str, str, int]]:
  """(preset, mix, MTP blocks) for every recorded case."""
  return [(p, m, 0) for p in synth.TINY for m in synth.MIXES] + [("glm-4.7-flash-tiny", "release", 1)]

def _preset(name: str, nextn: int) -> synth.Preset:
  p = synth.get_preset(name)
  return dataclasses.replace(p, n_nextn=nextn) if nextn else p

def render(p: synth.Preset) -> str:
  import jinja2
  tokens, _, _, ids, _ = synth.vocab(p)
  env = jinja2.Environment(trim_blocks=False, lstrip_blocks=False)
  return env.from_string(synth.template_text(p)).render(messages=MESSAGES, add_generation_prompt=True,
                                                        bos_token=tokens[ids["bos"]], eos_token=tokens[ids["eos"]])

def load_and_eval(path: Path, p: synth.Preset, n_eval: int = 16) -> dict:
  import llama_cpp
  t0 = time.perf_counter()
  llm = llama_cpp.Llama(model_path=str(path), n_gpu_layers=0, n_ctx=128, n_batch=128, logits_all=True, verbose=False, seed=0)
  t_load = time.perf_counter() - t0
  _, _, _, ids, _ = synth.vocab(p)
  # every special token of the chat template is one token, with the id synth gave it; llama.cpp reads the same bos/eos
  specials_ok = all(llm.tokenize(t.encode(), add_bos=False, special=True) == [i] for t, i in synth.special_ids(p).items())
  roles_ok = llm.token_bos() == ids["bos"] and llm.token_eos() == ids["eos"]
  prompt = llm.tokenize(render(p).encode(), add_bos=False, special=True)[:n_eval]
  t0 = time.perf_counter()
  llm.eval(prompt)
  t_eval = time.perf_counter() - t0
  logits = np.array(llm.scores[:len(prompt)], dtype=np.float32)
  out = {"n_vocab": llm.n_vocab(), "n_tokens": len(prompt), "finite": bool(np.isfinite(logits).all()),
         "logit_std": round(float(logits.std()), 3), "specials_single_token": bool(specials_ok), "bos_eos_ids": bool(roles_ok),
         "load_s": round(t_load, 2), "eval_s": round(t_eval, 2)}
  out["ok"] = out["finite"] and out["specials_single_token"] and out["bos_eos_ids"] and out["n_vocab"] == p.n_vocab and out["logit_std"] > 0
  del llm
  return out

def check_one(name: str, mix: str, nextn: int, seed: int = 0) -> dict:
  p = _preset(name, nextn)
  t0 = time.perf_counter()
  path = synth.generate(p, mix, seed, progress=False)
  res = {"preset": name, "mix": mix, "nextn": nextn, "seed": seed, "sha256": sha256(path), "bytes": path.stat().st_size,
         "generate_s": round(time.perf_counter() - t0, 2)}
  res.update(load_and_eval(path, p))
  return res

def check(cases: list[tuple[str, str, int]] | None = None, log=print) -> dict:
  import llama_cpp
  results = []
  for name, mix, nextn in cases or variants():
    r = check_one(name, mix, nextn)
    log(f"{'ok  ' if r['ok'] else 'FAIL'} {name:22s} {mix:8s} mtp={nextn} vocab={r['n_vocab']} tokens={r['n_tokens']} "
        f"finite={r['finite']} specials={r['specials_single_token']} logit_std={r['logit_std']}")
    results.append(r)
  return {"llama_cpp_version": llama_cpp.__version__, "generator_version": synth.GENERATOR_VERSION, "tiny": results}

def check_full(name: str, mix: str, delete: bool, log=print) -> dict:
  """Generate a full-size file (timed), load it in llama.cpp (which checks every tensor's shape and type) and eval 2 tokens."""
  p = synth.get_preset(name)
  t0 = time.perf_counter()
  with tempfile.TemporaryDirectory(dir=synth.cache_dir()) as d:
    path = synth.generate(p, mix, 0, path=Path(d) / "full.gguf") if delete else synth.generate(p, mix, 0)
    t_gen = time.perf_counter() - t0
    res = {"preset": name, "mix": mix, "bytes": path.stat().st_size, "sha256": sha256(path), "generate_s": round(t_gen, 1)}
    res.update(load_and_eval(path, p, n_eval=2))
  res["params"] = synth.param_counts(p)
  log(f"{'ok  ' if res['ok'] else 'FAIL'} full {name} {mix}: {res['bytes'] / 2**30:.2f} GiB generated in {t_gen:.0f} s, "
      f"load {res['load_s']} s, eval 2 tokens {res['eval_s']} s, finite={res['finite']}")
  return res

def main() -> int:
  ap = argparse.ArgumentParser(prog="python3 -m tools.check_llamacpp_load", description=__doc__.split("\n")[0])
  ap.add_argument("--check", action="store_true", help="compare with the recorded golden instead of writing it")
  ap.add_argument("--full", action="append", default=[], metavar="PRESET[:MIX]", help="also load a full-size file")
  ap.add_argument("--delete", action="store_true", help="write full-size files to a temporary place and delete them")
  args = ap.parse_args()
  try: import llama_cpp  # noqa: F401
  except ImportError:
    print("error: llama_cpp is not installed: ./run pip install -r requirements-ref.txt", file=sys.stderr)
    return 1
  rec = check()
  old = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
  rec["full"] = old.get("full", [])
  for spec in args.full:
    name, _, mix = spec.partition(":")
    rec["full"] = [r for r in rec["full"] if (r["preset"], r["mix"]) != (name, mix or "release")]
    rec["full"].append(check_full(name, mix or "release", args.delete))
  ok = all(r["ok"] for r in rec["tiny"] + rec["full"])
  if args.check:
    key = lambda r: (r["preset"], r["mix"], r["nextn"])  # noqa: E731
    want = {key(r): r["sha256"] for r in old.get("tiny", [])}
    same = {key(r): r["sha256"] for r in rec["tiny"]} == want
    print("recorded file matches" if same else "recorded file differs: regenerate it with this tool")
    return 0 if ok and same else 1
  GOLDEN.parent.mkdir(parents=True, exist_ok=True)
  GOLDEN.write_text(json.dumps(rec, indent=1) + "\n")
  print(f"wrote {GOLDEN}")
  return 0 if ok else 1

if __name__ == "__main__": sys.exit(main())
