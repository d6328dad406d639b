"""Full-model numbers on the GPU in one go: load, prefill and decode of the full-size synthetic presets, the
device-to-device copy bandwidth, and one table with tok/s, ratios to llama.cpp and upstream tinygrad, and bandwidth-floor fractions.

  DEV=CUDA python3 -m tools.gpu_bench [--presets glm-4.7-flash,deepseek-v2-lite,youtu-llm-2b] [--decode 64] [--prefill 512]
                                      [--llama] [--upstream] [--json PATH]
  DEV=CUDA python3 -m tools.gpu_bench --depths 4096,16384 [--decode 64] [--llama]     long prompts, decode deep in the context
  DEV=CUDA python3 -m tools.gpu_bench --batch 1,4,8,16,32 [--decode 64] [--llama]    many sequences at once (batched decode)
  DEV=CUDA python3 -m tools.gpu_bench --batch 1,8 --mixed 256     and a prompt that starts beside them, its chunks as rows of
                                                                   their steps against each chunk alone between two steps

--llama builds llama.cpp's llama-bench where it is not built yet (tools.llama_bench; needs .cache/llama/llama-cpp-src.tar.xz
from `python3 -m tools.llama_bench pack`) and runs it first, on the same GGUF files: pp<--prefill> and tg128 with flash attention off and on,
and our ratios to its best, all measured in this run. --upstream times upstream tinygrad 0.14's own decode of each file
(bench_block's `upstream` target). Without them the ratio columns use the anchors below (measured earlier on an H100).

Runs with python3 + numpy + upstream/ only (the GPU machine cannot pip install). --json PATH is rewritten after every model.
"""
from __future__ import annotations
import argparse, gc, json, math, os, time
from pathlib import Path
import numpy as np
import apps  # noqa: F401
from tinygrad import Device, GlobalCounters
from apps import synth
from apps.model import PREFILL_CHUNKS, Transformer
from apps.llm import default_params, _int as int_in
from apps import KERNEL_PATHS, CACHE_TYPES
import bench_block as bb  # copy_bandwidth (4 chained 1 GiB copies in one TinyJit, read + write bytes), upstream_step, measure
from tools import llama_bench as llama_cpp

# llama.cpp tg128 (best of fa0/fa1) and upstream tinygrad 0.14 decode on the H100, same synthetic files (the anchors)
ANCHORS = {"glm-4.7-flash": (196, 6.8), "deepseek-v2-lite": (351, 12.8), "youtu-llm-2b": (382, 32.8)}
DECODE_AFTER = 16  # prompt tokens before the timed decode steps, ours and upstream's
PREFILL_RUNS = 5  # timed prefills after the compile and the capture (their median counts)

def release() -> None:
  """The models before this one gone, with the buffers tinygrad's allocator keeps for reuse (sized for their tensors, they
  would stay beside the next model's: on a 24 GB CPU machine DeepSeek-V2-Lite's 9 GB then GLM-4.7-Flash's 17 GB do not fit)."""
  gc.collect()
  if hasattr(alloc := Device[Device.DEFAULT].allocator, "free_cache"): alloc.free_cache()

def bench(preset: str, path: Path, n_decode: int, n_prefill: int, mix: str, upstream: bool = False, kernels: str = "hand",
          cache_type: str = "f32") -> dict:
  """Our load, prefill (n_prefill tokens) and steady decode of one file; with upstream, tinygrad.llm's decode of it too."""
  file_bytes = path.stat().st_size
  release()  # the previous model's buffers (ours and upstream's) go now, not during this load: they would hide in the delta
  mem0 = GlobalCounters.mem_used
  t0 = time.perf_counter()
  model = Transformer.from_gguf(path, max_context=n_prefill + n_decode + 64, kernels=kernels, cache_type=cache_type)
  Device[model.device].synchronize()
  t_load = time.perf_counter() - t0
  mem = GlobalCounters.mem_used - mem0
  rng = np.random.default_rng(0)
  prompt = rng.integers(0, 100000, n_prefill).tolist()
  # prefill: the first run compiles and captures, the second is the first replay; the median of the next PREFILL_RUNS is the
  # steady time (llama-bench's pp is likewise a mean after a warm-up; the first replay of a capture alone can be slower)
  pf = []
  for i in range(2 + PREFILL_RUNS):
    model.reset()
    t0 = time.perf_counter()
    first = next(model.generate(prompt, 1))
    pf.append(time.perf_counter() - t0)
  t_first = pf[0]
  # decode: warm up (capture), then time steady tokens, greedy (llama-bench's tg: no sampling) and with llama.cpp's default
  # sampling chain (the CLI's and the server's default)
  runs = []
  for params in (None, default_params()):
    model.reset()
    times, last = [], time.perf_counter()
    for _ in model.generate(prompt[:DECODE_AFTER], n_decode + 3, params):
      now = time.perf_counter()
      times.append(now - last)
      last = now
    runs.append(np.array(times[4:]))  # drop prefill + first decode steps (JIT capture)
  steady, sampled = runs
  ms = float(np.median(steady)) * 1e3
  active = model.active_weight_bytes()
  res = {"preset": preset, "mix": mix, "file": path.name, "file_gb": file_bytes / 1e9, "load_s": t_load, "weights_gb": model.weight_bytes() / 1e9,
         "device_mem_gb": mem / 1e9, "first_token_s": t_first, "prefill_tok_s": n_prefill / float(np.median(pf[2:])),
         "decode_ms": ms, "decode_p10_ms": float(np.percentile(steady, 10)) * 1e3, "decode_p90_ms": float(np.percentile(steady, 90)) * 1e3,
         "decode_tok_s": 1e3 / ms, "sampled_decode_ms": float(np.median(sampled)) * 1e3, "active_gb": active / 1e9,
         "first_generated": int(first), "n_prefill": n_prefill}
  if upstream:  # upstream's Transformer on the same file (a second copy of the weights), timed as bench_block times it
    r = bb.measure(bb.upstream_step(path, model, DECODE_AFTER), n_decode, 1)
    res.update(upstream_tok_s=r["tok_s"], upstream_ms=r["ms"], upstream_kernels=r["kernels"])
  del model
  return res

def at_depths(preset: str, path: Path, depths: list[int], n_decode: int, kernels: str = "hand", cache_type: str = "f32",
              chunks: tuple[int, ...] | None = None) -> list[dict]:
  """Long prompts and decode deep in the context, llama-bench's pp<D> and tg<n>@d<D>: for each D, one generate of a
  D-token prompt and n_decode tokens after it; prefill tok/s = D / the time to the first token, decode tok/s from the first
  token to the last. The steps are captured first by a short prompt (they serve every position, so no warm-up at D)."""
  release()
  model = Transformer.from_gguf(path, max_context=max(depths) + n_decode + 64, kernels=kernels, cache_type=cache_type, prefill_chunks=chunks)
  rng = np.random.default_rng(0)
  for c in model.prefill_chunks:  # a prompt that ends in a chunk of each length: the captures, then their first replay
    warm = rng.integers(0, 100000, min(max(model.prefill_chunks) + c, model.max_context - 8)).tolist()
    for _ in range(2):
      model.reset()
      for _ in model.generate(warm, 4): pass
  rows = []
  for d in depths:
    prompt = rng.integers(0, 100000, d).tolist()
    model.reset()
    t0 = time.perf_counter()
    stamps = [time.perf_counter() for _ in model.generate(prompt, n_decode + 1)]
    rows.append({"preset": preset, "depth": d, "prefill_tok_s": d / (stamps[0] - t0), "decode_tok_s": n_decode / (stamps[-1] - stamps[0]),
                 "n_decode": n_decode})
    print(json.dumps(rows[-1]), flush=True)
  del model
  return rows

BATCH_PROMPT = 32   # prompt tokens of each sequence of a --batch run (llama-batched-bench -npp)
BATCH_CHECK = 16    # tokens of each of the first rows compared with the same prompt's generate() alone

def prompt_turns(model: Transformer, slots: list[int], ids: list[int], mixed: bool, chunk: int | None = None) -> tuple[float, int, int]:
  """Prefill ids into slot len(slots) in chunks of `chunk` tokens (default the shortest, as the server does) while slots
  decode: each chunk as rows of their step (mixed), or alone before it (the step before collected first). (seconds, turns,
  the prompt's first token)."""
  chunk = chunk or model.prefill_chunks[-1]
  model.reset(len(slots))
  p, prev, turns, first = model.begin(len(slots), ids), None, 0, None
  t0 = time.perf_counter()
  while first is None:
    if not mixed:
      if prev is not None: model.collect(prev)
      prev, first = None, model.fill_chunk(p, lambda: chunk)
    step = model.launch(slots, p if mixed else None, chunk)
    if prev is not None: model.collect(prev)
    prev, turns = step, turns + 1
    if step.first is not None: first = model.collect(step)[-1]; prev = None
  if prev is not None: model.collect(prev)
  return time.perf_counter() - t0, turns, first

def at_batches(preset: str, path: Path, sizes: list[int], n_decode: int, kernels: str = "hand", cache_type: str = "f32",
               mixed: int = 0, mixed_chunk: int | None = None) -> list[dict]:
  """Aggregate decode of B sequences at once (Transformer.launch / collect, as the server runs them: each step launched
  before the one before it is read), llama-batched-bench's S_TG: B prompts of BATCH_PROMPT tokens prefilled into B slots,
  then n_decode batched steps timed; tok/s = B * n_decode / time. The first BATCH_CHECK tokens of up to four rows are compared with each prompt's
  generate() alone (greedy): "agree" is where each first differs (BATCH_CHECK: the same tokens). With `mixed` (tokens), a
  prompt that long then starts beside the B rows (prompt_turns in chunks of `mixed_chunk` tokens, each form twice: the first
  captures): ms a turn (a step and a chunk) in each form, and whether both forms' first tokens agree."""
  release()
  extra = 4 * (mixed // 16 + 4) if mixed else 0   # the rows' positions the prompt's turns take
  chunks = PREFILL_CHUNKS + ((mixed_chunk,) if mixed_chunk and mixed_chunk not in PREFILL_CHUNKS else ())   # a length to try
  model = Transformer.from_gguf(path, max_context=max(BATCH_PROMPT + n_decode + BATCH_CHECK + 64 + extra, mixed + 2), kernels=kernels,
                                cache_type=cache_type, slots=max(sizes) + bool(mixed), prefill_chunks=chunks)
  rng = np.random.default_rng(0)
  prompts = [rng.integers(0, 100000, BATCH_PROMPT).tolist() for _ in range(max(sizes))]
  alone = [list(model.generate(p, BATCH_CHECK)) for p in prompts[:4]]
  rows = []
  for B in sizes:
    slots = list(range(B))
    toks = [[list(model.start(s, prompts[s]))[-1]] for s in slots]
    for _ in range(2):  # the capture of this size, then its first replay
      for s, t in zip(slots, model.step(slots)): toks[s].append(t)
    t0, prev = time.perf_counter(), None
    for _ in range(n_decode):
      step = model.launch(slots)
      if prev is not None:
        for s, t in zip(slots, model.collect(prev)): toks[s].append(t)
      prev = step
    for s, t in zip(slots, model.collect(prev)): toks[s].append(t)
    dt = time.perf_counter() - t0
    agree = [next((i for i, (a, b) in enumerate(zip(toks[s], ref)) if a != b), BATCH_CHECK) for s, ref in zip(slots, alone)]
    rows.append({"preset": preset, "batch": B, "decode_tok_s": B * n_decode / dt, "step_ms": dt / n_decode * 1e3, "agree": agree})
    if mixed:
      ids = rng.integers(0, 100000, mixed).tolist()
      for form in ("between", "mixed"):
        for _ in range(2): s, turns, first = prompt_turns(model, slots, ids, form == "mixed", mixed_chunk)
        rows[-1].update({f"{form}_turn_ms": s / turns * 1e3, f"{form}_turns": turns, f"{form}_first": first})
    print(json.dumps(rows[-1]), flush=True)
  del model
  return rows

def batch_table(rows: list[dict], llama: dict) -> list[str]:
  """One line per model and batch size: our aggregate decode tok/s, per sequence, against B = 1 and llama-batched-bench's best S_TG."""
  out = [f"{'model':18s} {'B':>3s} {'tok/s':>9s} {'x B=1':>6s} {'step ms':>8s} {'lc S_TG':>9s} {'x lc':>6s}  agree" +
         ("  turn ms: chunk between / mixed" if any("mixed_turn_ms" in r for r in rows) else "")]
  one = {r["preset"]: r["decode_tok_s"] for r in rows if r["batch"] == 1}
  for r in rows:
    lc = llama.get(r["preset"], {}).get("best_s_tg", {}).get(r["batch"])
    x1 = _ratio(r["decode_tok_s"], one.get(r["preset"]))
    out.append(f"{r['preset']:18s} {r['batch']:3d} {r['decode_tok_s']:9.1f} {'-' if x1 is None else format(x1, '6.2f'):>6s} {r['step_ms']:8.2f} "
               f"{'-' if lc is None else format(lc, '9.1f'):>9s} {'-' if lc is None else format(r['decode_tok_s'] / lc, '6.2f'):>6s}  "
               f"{','.join(map(str, r['agree']))}" + (f"  {r['between_turn_ms']:.2f} / {r['mixed_turn_ms']:.2f}"
               f"{'' if r['between_first'] == r['mixed_first'] else ' (first tokens differ)'}" if "mixed_turn_ms" in r else ""))
  return out

def depth_table(rows: list[dict], llama: dict) -> list[str]:
  """One line per model and depth: ours against llama-bench's best pp<D> and tg128@d<D> measured in this run, where it ran."""
  out = [f"{'model':18s} {'depth':>6s} {'prefill t/s':>11s} {'lc pp':>9s} {'x lc pp':>8s} {'decode t/s':>10s} {'lc tg@d':>9s} {'x lc tg':>8s}"]
  f = lambda v, spec: f"{'-':>{int(spec.split('.')[0])}s}" if v is None else format(v, spec)
  for r in rows:
    lc = llama.get(r["preset"], {})
    pp, tg = llama_cpp.best(lc, f"pp{r['depth']}"), llama_cpp.best(lc, f"tg128@d{r['depth']}")
    out.append(f"{r['preset']:18s} {r['depth']:6d} {r['prefill_tok_s']:11.1f} {f(pp, '9.1f')} {f(_ratio(r['prefill_tok_s'], pp), '8.3f')} "
               f"{r['decode_tok_s']:10.1f} {f(tg, '9.1f')} {f(_ratio(r['decode_tok_s'], tg), '8.3f')}")
  return out

# ---------------------------------------------------------------- the table

def _ratio(a, b) -> float | None: return a / b if a is not None and b else None

def columns(rows: list[dict]) -> list[tuple[str, str, object]]:
  """(header, format, row -> value or None) for the rows: measured llama.cpp / upstream columns where the rows have them
  (a failed llama-bench run leaves its cells empty), the anchor ratios otherwise."""
  cols = [("model", "18s", lambda r: r["preset"]), ("file GB", "8.2f", lambda r: r["file_gb"]), ("load s", "7.1f", lambda r: r["load_s"]),
          ("mem GB", "7.2f", lambda r: r["device_mem_gb"]), ("prefill t/s", "11.1f", lambda r: r["prefill_tok_s"]),
          ("decode t/s", "10.2f", lambda r: r["decode_tok_s"]), ("ms/tok", "7.1f", lambda r: r["decode_ms"]),
          ("sampled ms", "10.2f", lambda r: r.get("sampled_decode_ms")),
          ("floor t/s", "9.0f", lambda r: r["floor_tok_s"]), ("% floor", "7.1f", lambda r: 100 * r["decode_tok_s"] / r["floor_tok_s"])]
  if any("llama" in r for r in rows):
    lc = lambda r, test, fa=None: (llama_cpp.best(r.get("llama", {}), test) if fa is None else r.get("llama", {}).get(test, {}).get(fa))
    pp = f"pp{rows[0]['n_prefill']}"  # llama-bench runs with our prefill length
    cols += [(f"lc {pp}", "9.1f", lambda r: lc(r, pp)), ("lc tg fa0", "9.1f", lambda r: lc(r, "tg128", "fa0")),
             ("lc tg fa1", "9.1f", lambda r: lc(r, "tg128", "fa1")),
             ("lc % floor", "10.1f", lambda r: None if lc(r, "tg128") is None else 100 * lc(r, "tg128") / r["floor_tok_s"]),
             ("x lc pp", "8.3f", lambda r: _ratio(r["prefill_tok_s"], lc(r, pp))),
             ("x lc tg", "8.3f", lambda r: _ratio(r["decode_tok_s"], lc(r, "tg128")))]
  else: cols.append(("x llama.cpp", "11.3f", lambda r: _ratio(r["decode_tok_s"], ANCHORS.get(r["preset"], (None, None))[0])))
  if any("upstream_tok_s" in r for r in rows):
    cols += [("tg 0.14 t/s", "11.2f", lambda r: r.get("upstream_tok_s")),
             ("x tg 0.14", "9.2f", lambda r: _ratio(r["decode_tok_s"], r.get("upstream_tok_s")))]
  else: cols.append(("x tg 0.14", "9.2f", lambda r: _ratio(r["decode_tok_s"], ANCHORS.get(r["preset"], (None, None))[1])))
  return cols

def table(rows: list[dict]) -> list[str]:
  """The summary: one line per model, and a last line that says where the comparison numbers come from."""
  cols = columns(rows)
  width = lambda spec: int(spec.rstrip("sfd").split(".")[0])
  cell = lambda v, spec: f"{'-':>{width(spec)}s}" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)
  out = [" ".join(f"{h:{'<' if s.endswith('s') else '>'}{width(s)}s}" for h, s, _ in cols)]
  out += [" ".join(cell(f(r), s) for _, s, f in cols) for r in rows]
  src = []
  if any("llama" in r for r in rows):
    commits = sorted({str(r["llama"].get("build_commit")) for r in rows if "llama" in r and "error" not in r["llama"]})
    src.append(f"llama.cpp {'/'.join(commits) or '?'} llama-bench measured in this run (lc tg: best of fa0/fa1; x lc: ours / lc best)")
    src += [f"llama-bench failed on {r['preset']}: {r['llama']['error']}" for r in rows if "error" in r.get("llama", {})]
  else: src.append("x llama.cpp: ours / the llama.cpp tg128 anchor")
  src.append("x tg 0.14: ours / upstream tinygrad 0.14 decode " + ("measured in this run" if any("upstream_tok_s" in r for r in rows) else "anchor"))
  return out + [""] + src

# ---------------------------------------------------------------- main

def main() -> None:
  ap = argparse.ArgumentParser(prog="python3 -m tools.gpu_bench", description=__doc__.split("\n\n")[0])
  ap.add_argument("--presets", default="youtu-llm-2b,deepseek-v2-lite,glm-4.7-flash")
  ap.add_argument("--mix", default="release")
  ap.add_argument("--decode", type=int, default=64)
  ap.add_argument("--prefill", type=int, default=512)
  ap.add_argument("--llama", action="store_true", help="build llama-bench if needed and run it on the same files (tools.llama_bench)")
  ap.add_argument("--llama-build-limit", type=float, default=480, help="seconds the llama-bench build may take in this run (it resumes)")
  ap.add_argument("--upstream", action="store_true", help="time upstream tinygrad 0.14's decode of the same files")
  ap.add_argument("--kernels", default="hand", choices=KERNEL_PATHS, help="hand-written kernels (default) or tinygrad's generated ones only")
  ap.add_argument("--cache-type", choices=CACHE_TYPES, default="f32", help="our latent cache's elements (llama-bench keeps its f16 default)")
  ap.add_argument("--depths", help="comma list of context depths: prefill of a prompt that long and decode after it (and llama-bench's "
                  "pp<D> with flash attention off and on, tg128@d<D> with it on, with --llama), instead of the short-context numbers")
  ap.add_argument("--chunks", help="comma list of prefill chunk lengths for --depths (the model's default: 512,128,32, and 2048 "
                  "where apps/model.py takes it)")
  ap.add_argument("--batch", help="comma list of batch sizes: aggregate decode of that many sequences at once (and llama-batched-bench's "
                  "S_TG with --llama), instead of the short-context numbers")
  ap.add_argument("--mixed", type=int, default=0, help="with --batch: a prompt of this many tokens beside each batch, its chunks as "
                  "rows of the batch's steps against each chunk alone between two steps (ms a turn)")
  ap.add_argument("--mixed-chunk", type=int_in(1, max(PREFILL_CHUNKS)), metavar="N", help="with --mixed: the "
                  "prompt's chunks of this many tokens (default the shortest, as the server's; a length the model lacks is added)")
  ap.add_argument("--json", type=Path)
  args = ap.parse_args()
  depths = [int(d) for d in args.depths.split(",")] if args.depths else []
  sizes = [int(b) for b in args.batch.split(",")] if args.batch else []
  out_dir = Path(os.environ["OUT"]) if os.environ.get("OUT") else None
  if args.llama:  # first: a build that cannot finish in this run stops it before anything else is spent
    try: exe = llama_cpp.build(cuda=Device.DEFAULT.split(":")[0] != "CPU", jobs=os.cpu_count() or 8, time_limit=args.llama_build_limit)
    except llama_cpp.LlamaError as e: raise SystemExit(f"gpu_bench: {e}")
    if exe is None: raise SystemExit(f"gpu_bench: the llama-bench build did not finish in {args.llama_build_limit:.0f} s; run again to go on")
  print(f"device {Device.DEFAULT}, patch series {apps.SERIES}", flush=True)
  presets = args.presets.split(",")
  for p in presets:
    if p not in synth.PRESETS: raise SystemExit(f"gpu_bench: unknown preset '{p}' ({', '.join(synth.PRESETS)})")
  paths, gen_s = {}, {}
  for p in presets:  # generated (or found in the cache) up front: llama-bench reads the same files
    t0 = time.perf_counter()
    paths[p] = synth.generate(p, args.mix, progress=False)
    gen_s[p] = time.perf_counter() - t0
    print(f"{p}: {paths[p].name} ({gen_s[p]:.0f} s)", flush=True)
  llama = {}
  if args.llama:  # before tinygrad holds any device memory (its allocator keeps freed buffers)
    log = out_dir / "llama-bench.log" if out_dir else None
    files = [paths[p] for p in presets]
    if sizes: res = llama_cpp.batched(files, ",".join(map(str, sizes)), BATCH_PROMPT, 128, exe=exe.with_name("llama-batched-bench"), log_path=log)
    elif depths:
      res = llama_cpp.bench(files, exe, n_prompt=",".join(map(str, depths)), n_gen=0, reps=3, log_path=log)
      # decode at depth with flash attention on only: off, it was 1.9-8.1x slower at every depth of 4k-32k on all three models in
      # every run so far (H100 and H200: its fastest against on's slowest), and it took half of llama-bench's time at depth
      for r, r2 in zip(res, llama_cpp.bench(files, exe, n_prompt=0, n_gen=128, reps=3, fa="1", log_path=log, depth=",".join(map(str, depths)))):
        r.update({k: v for k, v in r2.items() if k not in ("stddev", "seconds")} if "error" not in r else {})
    else: res = llama_cpp.bench(files, exe, n_prompt=args.prefill, n_gen=128, reps=3, log_path=log)
    llama = dict(zip(presets, res))
    if sizes: print("\n".join(f"{x['file']} S_TG " + " ".join(f"B={B}: {v:.1f}" for B, v in x["best_s_tg"].items()) for x in res), flush=True)
    else: print("\n".join(llama_cpp.bench_lines(res)), flush=True)
  if sizes:
    rows = [r for p in presets for r in at_batches(p, paths[p], sizes, args.decode, args.kernels, args.cache_type, args.mixed,
                                                 args.mixed_chunk)]
    if args.json: args.json.write_text(json.dumps({"device": Device.DEFAULT, "rows": rows, "llama": llama}, indent=1))
    print("\n" + "\n".join(batch_table(rows, llama)))
    return
  if depths:
    chunks = tuple(int(c) for c in args.chunks.split(",")) if args.chunks else None
    rows = [r for p in presets for r in at_depths(p, paths[p], depths, args.decode, args.kernels, args.cache_type, chunks)]
    if args.json: args.json.write_text(json.dumps({"device": Device.DEFAULT, "rows": rows, "llama": llama}, indent=1))
    print("\n" + "\n".join(depth_table(rows, llama)))
    return
  bw = bb.copy_bandwidth(Device.DEFAULT, bb.default_copy_mib(Device.DEFAULT))
  print(f"copy bandwidth {bw / 1e9:.0f} GB/s (read + write)", flush=True)
  rows = []
  for p in presets:
    r = bench(p, paths[p], args.decode, args.prefill, args.mix, args.upstream, args.kernels, args.cache_type)
    r["floor_tok_s"], r["gen_s"] = bw / (r["active_gb"] * 1e9), gen_s[p]
    if p in llama: r["llama"] = llama[p]
    rows.append(r)
    print(json.dumps(r), flush=True)
    if args.json: args.json.write_text(json.dumps({"device": Device.DEFAULT, "copy_bw": bw, "rows": rows}, indent=1))
  print("\n" + "\n".join(table(rows)))

if __name__ == "__main__": main()
