"""Do the model's paths agree at full size? The logits of the same random tokens computed three ways on one loaded model:

  prefill    one `model.logits(ids)` call (the prompt path: GEMMs, prefill attention and routing kernels where the device has them)
  decode     the first tokens by prefill, then one captured decode step per token (the decode kernels, as generate() runs them)
  generated  `model.logits(ids)` with tinygrad's own kernels only (`set_kernels("generated")`: fp32 throughout)

(with --floor also the generated path with NOOPT=1, one thread an output: fp32 against fp32 summed in another order, the
floor of any comparison) and their relative L2 distance over the compared rows (the last `--tokens - --skip` of the window), with how many rows
pick the same argmax. `--depth` puts the window after that many prompt tokens (a depth past the first prefill chunk checks
a chunk that reads another chunk's latents).

  DEV=CUDA python3 -m tools.path_check [--presets glm-4.7-flash,deepseek-v2-lite,youtu-llm-2b] [--depth 0,600]
  DEV=CUDA python3 -m tools.path_check --blocks glm-4.7-flash     # where the prefill and generated paths part, block by block
  DEV=CUDA python3 -m tools.path_check --mixed                    # a prompt as rows of another sequence's steps, against alone

--pinned adds the prefill path against the generated path routed to the same experts (both over the whole window as one
chunk, block by block): numerics apart from near-tie decisions, which at depth decide at fp32's precision.

--blocks runs both paths block by block on one window: free-running (each path on its own hidden state) and teacher-forced
(each block of the prefill path fed the generated path's input of that block), and prints per block the distance of the
hidden state, of the attention's and the feed-forward's contributions, of the router logits, and the routing decisions that
differ with the margins the generated path had there (its k-th best choice score minus its (k+1)-th).

--mixed prefills the window into one slot as rows of another slot's decode steps (Transformer.launch(slots, prompt): the
mixed step, chunks of --chunks' shortest) and alone (Transformer.start), and prints the relative L2 distance of the latent
cache rows they leave (the worst block), whether the prompt's first token and the other slot's tokens are the same both ways.
"""
from __future__ import annotations
import argparse, sys, time
import numpy as np
import apps  # noqa: F401
from tinygrad import Tensor, TinyJit, Device, dtypes
from tinygrad.helpers import Context
from apps import synth, CACHE_TYPES
from apps.mla import Gating
from apps.model import Transformer

def rel(a: np.ndarray, b: np.ndarray) -> float:
  """||a - b|| / ||b|| in float64."""
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))

def window(n_vocab: int, n: int, seed: int) -> list[int]:
  """n random token ids in [100, min(100000, vocab)) from `seed` (the same ids for every path and model)."""
  return np.random.default_rng(seed).integers(100, min(100000, n_vocab), n).tolist()

def decode_logits(model: Transformer, ids: list[int], first: int) -> np.ndarray:
  """Logits of rows first.. of ids, the first `first` tokens prefilled, then one decode step each: the decode step's kernels
  as generate() captures them (T = 1 at the model's symbolic start position, in a TinyJit), with the head on its row."""
  model.reset()
  model.fill(ids[:first])
  step = TinyJit(lambda tok, pos: model.head(model.hidden(tok, pos)).realize())
  rows = [step(Tensor([t], dtype=dtypes.int32, device=model.device), model.start_pos.bind(first + i)).numpy()
          for i, t in enumerate(ids[first:])]
  model.cached = list(ids)
  return np.concatenate(rows)

def three_ways(model: Transformer, ids: list[int], first: int, floor: bool = False, generated: bool = True) -> dict[str, np.ndarray]:
  """Logits of rows first.. of ids by the prefill, decode and generated paths (and with `floor` the generated one unoptimized)."""
  out = {}
  model.set_kernels("hand")
  out["prefill"] = model.logits(ids)[first:]
  out["decode"] = decode_logits(model, ids, first)
  if not generated: return out
  model.set_kernels("generated")
  out["generated"] = model.logits(ids)[first:]
  if floor:  # fp32 against fp32 summed in another order: tinygrad's kernels without optimizations (one thread an output)
    model.drop_captures()  # logits() replays captures: these are made under NOOPT
    with Context(NOOPT=1): out["generated, NOOPT"] = model.logits(ids)[first:]
  model.set_kernels("hand")
  return out

PAIRS = (("prefill", "generated"), ("decode", "generated"), ("prefill", "decode"), ("generated, NOOPT", "generated"))

def check(presets: list[str], mix: str, depths: list[int], n_tokens: int, skip: int, seed: int, floor: bool = False,
          pin: bool = False, cache_type: str = "f32", generated: bool = True, chunks: tuple[int, ...] | None = None) -> list[dict]:
  rows = []
  for preset in presets:
    path = synth.generate(preset, mix, progress=False)
    t0 = time.perf_counter()
    model = Transformer.from_gguf(path, max_context=max(depths) + n_tokens + 8, cache_type=cache_type, prefill_chunks=chunks)
    print(f"{preset}: loaded in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    for depth in depths:
      ids = window(model.cfg.vocab_size, depth + n_tokens, seed)
      t0 = time.perf_counter()
      got = three_ways(model, ids, depth + skip, floor, generated)
      row = {"preset": preset, "mix": mix, "depth": depth, "rows": n_tokens - skip, "s": round(time.perf_counter() - t0, 1)}
      for a, b in PAIRS:
        if a not in got or b not in got: continue
        row[f"{a}/{b}"] = rel(got[a], got[b])
        row[f"{a}/{b} argmax"] = int((got[a].argmax(-1) == got[b].argmax(-1)).sum())
      if pin: row.update(pinned(model, ids, depth + skip))
      rows.append(row)
      print(row, flush=True)
    del model
  return rows

def table(rows: list[dict]) -> str:
  pin = any("pinned" in r for r in rows)
  head = "| model | depth | " + " | ".join(f"{a} vs {b}" for a, b in PAIRS) + (" | prefill vs generated, routing pinned |" if pin else " |")
  lines = [head, "|" + " --- |" * (2 + len(PAIRS) + pin)]
  for r in rows:
    cells = [f"{r[f'{a}/{b}']:.1e} ({r[f'{a}/{b} argmax']}/{r['rows']})" if f"{a}/{b}" in r else "-" for a, b in PAIRS]
    if pin: cells.append(f"{r['pinned']:.1e} ({r['decisions that differ']} decisions differ, margins <= "
                         f"{r['largest margin where they differ']:.1e})" if "pinned" in r else "-")
    lines.append(f"| {r['preset']} | {r['depth']} | " + " | ".join(cells) + " |")
  return "\n".join(lines)

# ---- block by block

def choice_scores(model: Transformer, block, logits: np.ndarray) -> np.ndarray:
  """The scores the routing ranks (float64): gating probabilities plus the selection bias."""
  l = np.asarray(logits, np.float64)
  cfg = model.cfg
  if cfg.gating == Gating.SIGMOID: p = 1 / (1 + np.exp(-l))
  elif cfg.gating == Gating.SOFTMAX: p = np.exp(l - l.max(-1, keepdims=True)); p /= p.sum(-1, keepdims=True)
  else: p = l
  return p + (block.exp_probs_b.numpy().astype(np.float64) if block.exp_probs_b is not None else 0.0)

def trace(model: Transformer, ids: list[int], forced: list[dict] | None = None, pinned: list[dict] | None = None) -> list[dict]:
  """Each block's input x, its state h after the attention, its router logits / selection / weights and its output, for
  ids at position 0 in a fresh context; with `forced`, each block takes forced[i]["x"] as its input; with `pinned`, each
  MoE block routes to pinned[i]["sel"] (the experts another path chose) with weights from its own logits."""
  model.reset()
  x = model.token_embd(Tensor(ids, dtype=dtypes.int32, device=model.device)).float()
  args = model.rope_args(0, len(ids))
  rec = []
  for i, (b, cache) in enumerate(zip(model.blocks, model.caches)):
    if forced is not None: x = Tensor(forced[i]["x"], device=model.device)
    r = {"x": x.numpy()}
    h = b.attention(x, cache, *args).realize()
    r["h"] = h.numpy()
    sel = Tensor(pinned[i]["sel"], device=model.device) if pinned is not None and b.moe else None
    if b.moe:
      logits, sel, w = b.router(h, sel)
      r["logits"], r["sel"], r["w"] = logits.numpy(), sel.numpy(), w.numpy()
    x = b.feed_forward(h, sel).realize()
    r["out"] = x.numpy()
    rec.append(r)
  return rec

def pinned(model: Transformer, ids: list[int], first: int) -> dict[str, float]:
  """The prefill path against the generated path with the same routing: both over all ids as one chunk, block by block,
  the generated path routed to the experts the prefill path chose (weights from its own logits), so the distance of their
  logits (rows first..) is numerics alone, not near-tie decisions; and the decisions the generated path's own router
  logits would have made otherwise (on inputs that agree to that distance), with the largest of its top-k margins there."""
  model.set_kernels("hand")
  hand = trace(model, ids)
  model.set_kernels("generated")
  gen = trace(model, ids, pinned=hand)
  model.set_kernels("hand")
  head = lambda rec: model.head(Tensor(rec[-1]["out"][first:], device=model.device)).numpy()
  k, margins = model.cfg.n_expert_used, []
  for blk, h, g in zip(model.blocks, hand, gen):
    if "sel" not in h: continue
    scores = choice_scores(model, blk, g["logits"])
    order = np.argsort(-scores, -1, kind="stable")
    sc = np.take_along_axis(scores, order, -1)
    margins += [float(sc[t, k - 1] - sc[t, k]) for t, (a, own) in enumerate(zip(h["sel"], order[:, :k])) if set(a.tolist()) != set(own.tolist())]
  return {"pinned": rel(head(hand), head(gen)), "decisions that differ": len(margins), "largest margin where they differ": max(margins, default=0.0)}

def blocks(preset: str, mix: str, n_tokens: int, seed: int, chunks: tuple[int, ...] | None = None) -> None:
  path = synth.generate(preset, mix, progress=False)
  # the window is one chunk of n_tokens: `chunks` decides which attention forms the model prepares (flash_prefills)
  model = Transformer.from_gguf(path, max_context=n_tokens + 8, prefill_chunks=chunks)
  k = model.cfg.n_expert_used
  ids = window(model.cfg.vocab_size, n_tokens, seed)
  model.set_kernels("generated")
  ref = trace(model, ids)
  model.set_kernels("hand")
  free, forced = trace(model, ids), trace(model, ids, forced=ref)
  print(f"{preset}/{mix}: {n_tokens} tokens, block by block (prefill path against tinygrad's own kernels, relative L2)")
  print(f"{'blk':>3} {'x free':>8} {'attn fc':>8} {'ffn fc':>8} {'logit fc':>8} {'flips fc':>8} {'flips fr':>8}"
        "  margins (generated) where forced flips")
  for i, (r, fr, fc) in enumerate(zip(ref, free, forced)):
    attn = rel(fc["h"] - r["x"], r["h"] - r["x"])
    ffn = rel(fc["out"] - fc["h"], r["out"] - r["h"])
    line = f"{i:3d} {rel(fr['x'], r['x']):8.1e} {attn:8.1e} {ffn:8.1e}"
    if "logits" in r:
      flips = lambda o: int(sum(set(a.tolist()) != set(b.tolist()) for a, b in zip(o["sel"], r["sel"])))
      sc = np.sort(choice_scores(model, model.blocks[i], r["logits"]), -1)[:, ::-1]
      margin = sc[:, k - 1] - sc[:, k]
      where = [t for t, (a, b) in enumerate(zip(fc["sel"], r["sel"])) if set(a.tolist()) != set(b.tolist())]
      same = [t for t in range(len(ids)) if t not in where]
      line += f" {rel(fc['logits'], r['logits']):8.1e} {flips(fc):8d} {flips(fr):8d}  " + \
              ", ".join(f"t{t}: {margin[t]:.1e}" for t in where) + f"  (min margin {margin.min():.1e}; " + \
              f"ffn fc where the same experts {rel(fc['out'][same] - fc['h'][same], r['out'][same] - r['h'][same]):.1e})"
    print(line, flush=True)

def beside(model: Transformer, ids: list[int], other: list[int], as_rows: bool) -> tuple[list[np.ndarray], int, list[int]]:
  """Slot 0 decoding from `other` while ids go into slot 1 in its shortest chunks, as rows of slot 0's steps or alone
  between them: (every block's latent rows of ids, ids' first token, slot 0's tokens)."""
  for s in (0, 1): model.reset(s)
  *_, t = model.start(0, other)
  toks, p, first = [t], model.begin(1, ids), None
  while first is None:
    if as_rows:
      step = model.launch([0], p)
      out = model.collect(step)
      if step.first is not None: first = out[-1]
    else:
      first = model.fill_chunk(p, lambda: model.prefill_chunks[-1])
      out = model.step([0])
    toks.append(out[0])
  return [c[model.max_context:model.max_context + len(ids)].float().numpy() for c in model.caches], first, toks

def mixed(presets: list[str], mix: str, n_tokens: int, seed: int, cache_type: str = "f32", chunks: tuple[int, ...] | None = None) -> list[dict]:
  """Per preset: the window prefilled into slot 1 as rows of slot 0's steps and alone, compared (see the module's --mixed)."""
  rows = []
  for preset in presets:
    model = Transformer.from_gguf(synth.generate(preset, mix, progress=False), max_context=2 * n_tokens + 16, cache_type=cache_type,
                                  prefill_chunks=chunks, slots=2)
    ids, other = window(model.cfg.vocab_size, n_tokens, seed), window(model.cfg.vocab_size, 8, seed + 1)
    t0 = time.perf_counter()
    (lat_m, first_m, toks_m), (lat_a, first_a, toks_a) = beside(model, ids, other, True), beside(model, ids, other, False)
    rows.append({"preset": preset, "mix": mix, "tokens": n_tokens, "latents": max(rel(a, b) for a, b in zip(lat_m, lat_a)),
                 "first": first_m == first_a, "other": sum(a == b for a, b in zip(toks_m, toks_a)), "steps": len(toks_m),
                 "s": round(time.perf_counter() - t0, 1)})
    print(rows[-1], flush=True)
    del model
  return rows

def main() -> None:
  ap = argparse.ArgumentParser(prog="python3 -m tools.path_check", description=__doc__.split("\n\n")[0],
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--presets", default="glm-4.7-flash,deepseek-v2-lite,youtu-llm-2b")
  ap.add_argument("--mix", default="release")
  ap.add_argument("--depth", default="0", help="comma list of prompt tokens before the window (default 0)")
  ap.add_argument("--tokens", type=int, default=40, help="window length (default 40)")
  ap.add_argument("--skip", type=int, default=8, help="window tokens fed before the compared rows (default 8)")
  ap.add_argument("--seed", type=int, default=7)
  ap.add_argument("--cache-type", choices=CACHE_TYPES, default="f32", help="the latent cache's elements (every path reads the same)")
  ap.add_argument("--floor", action="store_true", help="add the generated path unoptimized (NOOPT=1) against the generated path")
  ap.add_argument("--pinned", action="store_true", help="add the prefill path against the generated path with the same expert choices")
  ap.add_argument("--chunks", help="comma list of prefill chunk lengths (the model's default unless given)")
  ap.add_argument("--no-generated", action="store_true", help="prefill vs decode only (the generated path is the slow one at depth)")
  ap.add_argument("--blocks", metavar="PRESET", help="block by block on this preset instead of the table")
  ap.add_argument("--mixed", action="store_true", help="the window as rows of another sequence's steps against alone, instead of the table")
  args = ap.parse_args()
  print(f"device {Device.DEFAULT}", flush=True)
  chunks = tuple(int(c) for c in args.chunks.split(",")) if args.chunks else None
  if args.blocks: return blocks(args.blocks, args.mix, args.tokens, args.seed, chunks)
  if args.mixed:
    mixed(args.presets.split(","), args.mix, args.tokens, args.seed, args.cache_type, chunks)
    return
  rows = check(args.presets.split(","), args.mix, [int(d) for d in args.depth.split(",")], args.tokens, args.skip, args.seed, args.floor,
               args.pinned, args.cache_type, not args.no_generated, chunks)
  print(table(rows))

if __name__ == "__main__": main()
