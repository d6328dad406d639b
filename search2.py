#!/usr/bin/env python3
"""Search over split masks (which named fusion boundaries get a .contiguous()) and BEAM levels, with resumable results.

  python3 search2.py --mode greedy --repeat 3 -- --model glm-4.7-flash --target stack
  python3 search2.py --mode exhaustive --beams 0,2 --iters 10 -- --model glm-4.7-flash-tiny
  python3 search2.py --mode random --samples 64 --bits attn_scores,router,gate_up

Generic over any module (--module, default bench_block) exposing SPLIT_POINTS (names of bits) and
bench_mask(mask, iters, beam) -> ms; optional: setup(argv) takes the options after `--` (or any this script does not
know), cache_key() -> str names what the numbers depend on, DEFAULT_SPLIT_MASK is the starting point, and
graph_key(mask) -> str identifies the kernels a mask produces: masks with the same kernels share one measurement (a split
point that the kernels already realize is a no-op), which the table, CSV and plot show.

Modes: exhaustive (every mask over the free bits), random (--samples distinct masks, the base included), greedy (flip the
single bit that helps most, until none helps by more than --min-gain). With several --beams the search is coupled: the
outer search is over masks, each mask is measured at every BEAM level and scores its best one, since the best mask
changes with BEAM; the table also gives the best mask per level. --repeat N measures each (mask, beam) N times (passes
interleave the masks, so drift spreads over all of them) and scores the median.

Every measurement is appended to a JSON-lines file keyed by the module's cache_key() and --iters, so an interrupted run
resumes where it stopped and a repeated one re-measures nothing. Output: a ranked table, <stem>.csv, <stem>.json and
<stem>.png (time per mask; written without matplotlib), and the one-line change that makes the winner the default.
"""
from __future__ import annotations
import argparse, csv, hashlib, importlib, importlib.util, itertools, json, math, random, struct, sys, time, zlib
from pathlib import Path
from types import ModuleType
from typing import Sequence

ROOT = Path(__file__).resolve().parent
DEFAULT_CACHE = ROOT / ".cache" / "search2"

# ---------------------------------------------------------------- results on disk

class ResultCache:
  """Append-only JSON lines: the first records the configuration key, then measurements {mask, beam, rep, ms} and the
  kernel-graph key of each mask {mask, graph}, in the order they were made."""
  def __init__(self, path: Path, key: str):
    self.path, self.key = path, key
    self.rows: dict[tuple[int, int, int], float] = {}
    self.graphs: dict[int, str] = {}
    if path.exists():
      for i, line in enumerate(path.read_text().splitlines()):
        if not line.strip(): continue
        try: rec = json.loads(line)
        except json.JSONDecodeError: continue  # a line cut short by an interrupted write
        if i == 0 and "key" in rec:
          if rec["key"] != key: raise SystemExit(f"search2: {path} belongs to another configuration ({rec['key']!r}); remove it or use --cache-dir")
          continue
        if "graph" in rec: self.graphs[rec["mask"]] = rec["graph"]
        else: self.rows[(rec["mask"], rec["beam"], rec["rep"])] = rec["ms"]
    else:
      path.parent.mkdir(parents=True, exist_ok=True)
      path.write_text(json.dumps({"key": key}) + "\n")

  def _append(self, rec: dict) -> None:
    with self.path.open("a") as f: f.write(json.dumps(rec) + "\n")

  def get(self, mask: int, beam: int, rep: int) -> float | None: return self.rows.get((mask, beam, rep))

  def put(self, mask: int, beam: int, rep: int, ms: float) -> None:
    self.rows[(mask, beam, rep)] = ms
    self._append({"mask": mask, "beam": beam, "rep": rep, "ms": ms, "t": round(time.time(), 1)})

  def put_graph(self, mask: int, graph: str) -> None:
    self.graphs[mask] = graph
    self._append({"mask": mask, "graph": graph})

# ---------------------------------------------------------------- search

def _median(xs: Sequence[float]) -> float:
  s = sorted(xs)
  n = len(s)
  return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2

class Search:
  """Measurements through the cache. With the module's graph_key(mask), masks that give the same kernels share one
  measurement: the first mask seen with a graph (in the cache file's order) stands for all of them."""
  def __init__(self, mod: ModuleType, cache: ResultCache, beams: Sequence[int], repeat: int, iters: int, log=print):
    self.mod, self.cache, self.beams, self.repeat, self.iters, self.log = mod, cache, list(beams), repeat, iters, log
    self.points: tuple[str, ...] = tuple(mod.SPLIT_POINTS)
    self.measured = 0   # bench_mask calls made by this run (cached results do not count)
    self.keyed = 0      # graph_key calls made by this run
    self.first: dict[str, int] = {}
    for m, g in cache.graphs.items(): self.first.setdefault(g, m)

  def rep_of(self, mask: int) -> int:
    """The mask whose measurements stand for this one (itself without graph_key)."""
    if not hasattr(self.mod, "graph_key"): return mask
    if (g := self.cache.graphs.get(mask)) is None:
      g = str(self.mod.graph_key(mask))
      self.keyed += 1
      self.cache.put_graph(mask, g)
    return self.first.setdefault(g, mask)

  def _one(self, mask: int, beam: int, rep: int) -> float:
    mask = self.rep_of(mask)
    if (ms := self.cache.get(mask, beam, rep)) is not None: return ms
    ms = float(self.mod.bench_mask(mask, self.iters, beam))
    self.measured += 1
    self.cache.put(mask, beam, rep, ms)
    self.log(f"  mask {mask:>5d} {mask:0{len(self.points)}b} beam {beam} rep {rep}: {ms:9.4f} ms")
    return ms

  def measure_all(self, masks: Sequence[int]) -> None:
    """Every (mask, beam) `repeat` times, a whole pass over the masks per repetition."""
    for rep in range(self.repeat):
      for mask in masks:
        for beam in self.beams: self._one(mask, beam, rep)

  def per_beam(self, mask: int) -> dict[int, float]:
    return {b: _median([self._one(mask, b, r) for r in range(self.repeat)]) for b in self.beams}

  def score(self, mask: int) -> tuple[float, int]:
    """(ms, beam) of the mask's best BEAM level."""
    pb = self.per_beam(mask)
    beam = min(pb, key=lambda b: (pb[b], b))
    return pb[beam], beam

def free_masks(base: int, free_bits: Sequence[int]) -> list[int]:
  """Every mask that agrees with base outside free_bits, in increasing order."""
  fixed = base & ~sum(1 << b for b in free_bits)
  return sorted(fixed | sum(1 << b for b, on in zip(free_bits, combo) if on) for combo in itertools.product((0, 1), repeat=len(free_bits)))

def exhaustive(s: Search, base: int, free_bits: Sequence[int]) -> list[int]:
  masks = free_masks(base, free_bits)
  s.measure_all(masks)
  return masks

def random_sample(s: Search, base: int, free_bits: Sequence[int], samples: int, seed: int) -> list[int]:
  space = free_masks(base, free_bits)
  rest = [m for m in space if m != base]
  masks = [base] + random.Random(seed).sample(rest, min(max(samples - 1, 0), len(rest)))
  s.measure_all(masks)
  return masks

def greedy(s: Search, base: int, free_bits: Sequence[int], min_gain: float) -> tuple[list[int], list[tuple[int, float, int]]]:
  """Hill-climb: from base, flip the free bit that lowers the score most, while it lowers it by more than min_gain (relative)."""
  cur = base
  s.measure_all([cur])
  path = [(cur, *s.score(cur))]
  seen = {cur}
  while True:
    cands = [cur ^ (1 << b) for b in free_bits]
    cands = [c for c in cands if s.rep_of(c) != s.rep_of(cur)]  # a flip that leaves the kernels as they are cannot help
    if not cands: return sorted(seen), path
    s.measure_all(cands)
    seen.update(cands)
    best = min(cands, key=lambda m: (s.score(m)[0], m))
    if s.score(best)[0] < path[-1][1] * (1 - min_gain):
      cur = best
      path.append((cur, *s.score(cur)))
      s.log(f"greedy: -> mask {cur} ({mask_label(cur, s.points)}) {path[-1][1]:.4f} ms")
    else: return sorted(seen), path

# ---------------------------------------------------------------- reporting

def mask_label(mask: int, points: Sequence[str]) -> str: return "+".join(n for i, n in enumerate(points) if mask >> i & 1) or "none"

def rank_rows(s: Search, masks: Sequence[int]) -> list[dict]:
  """One row per mask, best first; `same_as` names the mask with the same kernels whose measurements it shares."""
  rows = []
  for mask in masks:
    pb = s.per_beam(mask)
    ms, beam = s.score(mask)
    rep = s.rep_of(mask)
    reps = {b: [s.cache.get(rep, b, r) for r in range(s.repeat)] for b in s.beams}
    rows.append({"mask": mask, "bits": f"{mask:0{len(s.points)}b}", "splits": mask_label(mask, s.points), "ms": ms, "beam": beam,
                 "same_as": rep, "per_beam": {str(b): v for b, v in pb.items()}, "reps": {str(b): v for b, v in reps.items()}})
  rows.sort(key=lambda r: (r["ms"], r["same_as"] != r["mask"], r["mask"]))
  for i, r in enumerate(rows): r["rank"] = i + 1
  return rows

def no_op_bits(s: Search, masks: Sequence[int], free_bits: Sequence[int]) -> list[str] | None:
  """Free bits that never changed the kernel graph among the measured masks (None without graph_key)."""
  if not hasattr(s.mod, "graph_key"): return None
  ms = set(masks)
  out = []
  for b in free_bits:
    pairs = [(m, m ^ (1 << b)) for m in ms if m ^ (1 << b) in ms]
    if pairs and all(s.rep_of(x) == s.rep_of(y) for x, y in pairs): out.append(s.points[b])
  return out

def write_csv(path: Path, rows: list[dict], beams: Sequence[int]) -> None:
  with path.open("w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["rank", "mask", "bits", "splits", "ms", "best_beam", "same_kernels_as"] + [f"ms_beam{b}" for b in beams])
    for r in rows:
      w.writerow([r["rank"], r["mask"], r["bits"], r["splits"], f"{r['ms']:.6f}", r["beam"], r["same_as"]] +
                 [f"{r['per_beam'][str(b)]:.6f}" for b in beams])

def default_line(mask: int, points: Sequence[str], note: str) -> str:
  return f"DEFAULT_SPLIT_MASK = 0b{mask:0{len(points)}b}  # {mask_label(mask, points)}{'; ' + note if note else ''}"

# ---------------------------------------------------------------- a PNG plot without matplotlib

_FONT = {k: v.replace(" ", "") for k, v in {  # 3x5 glyphs, rows top to bottom
  "0": "### #.# #.# #.# ###", "1": ".#. ##. .#. .#. ###", "2": "### ..# ### #.. ###", "3": "### ..# ### ..# ###", "4": "#.# #.# ### ..# ..#",
  "5": "### #.. ### ..# ###", "6": "### #.. ### #.# ###", "7": "### ..# ..# ..# ..#", "8": "### #.# ### #.# ###", "9": "### #.# ### ..# ###",
  "A": ".#. #.# ### #.# #.#", "B": "##. #.# ##. #.# ##.", "C": ".## #.. #.. #.. .##", "D": "##. #.# #.# #.# ##.", "E": "### #.. ##. #.. ###",
  "F": "### #.. ##. #.. #..", "G": ".## #.. #.# #.# .##", "H": "#.# #.# ### #.# #.#", "I": "### .#. .#. .#. ###", "J": "..# ..# ..# #.# .#.",
  "K": "#.# #.# ##. #.# #.#", "L": "#.. #.. #.. #.. ###", "M": "#.# ### ### #.# #.#", "N": "##. #.# #.# #.# #.#", "O": ".#. #.# #.# #.# .#.",
  "P": "##. #.# ##. #.. #..", "Q": ".#. #.# #.# ##. .##", "R": "##. #.# ##. #.# #.#", "S": ".## #.. .#. ..# ##.", "T": "### .#. .#. .#. .#.",
  "U": "#.# #.# #.# #.# ###", "V": "#.# #.# #.# #.# .#.", "W": "#.# #.# ### ### #.#", "X": "#.# #.# .#. #.# #.#", "Y": "#.# #.# .#. .#. .#.",
  "Z": "### ..# .#. #.. ###", ".": "... ... ... ... .#.", "-": "... ... ### ... ...", ":": "... .#. ... .#. ...", "=": "... ### ... ### ...",
  "/": "..# ..# .#. #.. #..", "(": ".#. #.. #.. #.. .#.", ")": ".#. ..# ..# ..# .#.", "+": "... .#. ### .#. ...", "%": "#.# ..# .#. #.. #.#",
  "_": "... ... ... ... ###", " ": "... ... ... ... ...",
}.items()}
PALETTE = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (148, 103, 189), (140, 86, 75), (227, 119, 194)]

class Canvas:
  def __init__(self, w: int, h: int):
    self.w, self.h = w, h
    self.px = bytearray(b"\xff" * (w * h * 3))
  def dot(self, x: int, y: int, c) -> None:
    if 0 <= x < self.w and 0 <= y < self.h: self.px[(y * self.w + x) * 3:(y * self.w + x) * 3 + 3] = bytes(c)
  def rect(self, x0: int, y0: int, x1: int, y1: int, c) -> None:
    for y in range(max(0, y0), min(self.h, y1 + 1)):
      for x in range(max(0, x0), min(self.w, x1 + 1)): self.dot(x, y, c)
  def hline(self, x0, x1, y, c): self.rect(x0, y, x1, y, c)
  def vline(self, x, y0, y1, c): self.rect(x, y0, x, y1, c)
  def ring(self, x: int, y: int, r: int, c) -> None:
    for a in range(64):
      self.dot(round(x + r * math.cos(a * math.pi / 32)), round(y + r * math.sin(a * math.pi / 32)), c)
  def text(self, x: int, y: int, s: str, c=(0, 0, 0), scale: int = 2, anchor: str = "left") -> None:
    width = len(s) * 4 * scale
    x = x - width if anchor == "right" else x - width // 2 if anchor == "center" else x
    for i, ch in enumerate(s.upper()):
      g = _FONT.get(ch, _FONT[" "])
      for r in range(5):
        for col in range(3):
          px, py = x + (i * 4 + col) * scale, y + r * scale
          if g[r * 3 + col] == "#": self.rect(px, py, px + scale - 1, py + scale - 1, c)
  def png(self) -> bytes:
    raw = b"".join(b"\x00" + bytes(self.px[y * self.w * 3:(y + 1) * self.w * 3]) for y in range(self.h))
    chunk = lambda tag, data: struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0)) + \
      chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")

def _nice(x: float) -> str: return f"{x:.4g}"

def plot(path: Path, s: Search, rows: list[dict], base: int, title: str) -> None:
  """Time per mask: x is the mask value, one color per BEAM level (small dots: repeats, squares: medians); the best mask is
  ringed in red, the base mask marked by a grey vertical line."""
  W, H, L, R, T, B = 960, 440, 84, 20, 50, 46
  cv = Canvas(W, H)
  n_masks = 1 << len(s.points)
  vals = [v for r in rows for reps in r["reps"].values() for v in reps if v is not None] or [0.0, 1.0]
  lo, hi = min(vals), max(vals)
  pad = (hi - lo) * 0.06 or max(abs(hi) * 0.05, 1e-6)
  lo, hi = lo - pad, hi + pad
  X = lambda mask: L + round((mask + 0.5) / n_masks * (W - L - R))
  Y = lambda v: T + round((hi - v) / (hi - lo) * (H - T - B))
  grey, axis = (200, 200, 200), (60, 60, 60)
  for i in range(6):
    v = lo + (hi - lo) * i / 5
    cv.hline(L, W - R, Y(v), (235, 235, 235))
    cv.text(L - 6, Y(v) - 5, _nice(v), axis, anchor="right")
  for i in range(9):
    m = round(i * (n_masks - 1) / 8)
    cv.vline(X(m), H - B, H - B + 4, axis)
    cv.text(X(m), H - B + 8, str(m), axis, anchor="center")
  cv.vline(X(base), T, H - B, grey)
  cv.hline(L, W - R, H - B, axis)
  cv.vline(L, T, H - B, axis)
  for bi, beam in enumerate(s.beams):
    c = PALETTE[bi % len(PALETTE)]
    for r in rows:
      for v in r["reps"][str(beam)]:
        if v is not None: cv.dot(X(r["mask"]), Y(v), c); cv.dot(X(r["mask"]) + 1, Y(v), c)
      y = Y(r["per_beam"][str(beam)])
      cv.rect(X(r["mask"]) - 2, y - 2, X(r["mask"]) + 2, y + 2, c)
    cv.rect(W - R - 150, 10 + bi * 14, W - R - 142, 18 + bi * 14, c)
    cv.text(W - R - 136, 9 + bi * 14, f"BEAM={beam}", axis)
  if rows:
    best = rows[0]
    cv.ring(X(best["mask"]), Y(best["ms"]), 7, (220, 30, 30))
    cv.ring(X(best["mask"]), Y(best["ms"]), 8, (220, 30, 30))
    cv.text(L, 26, f"best mask {best['mask']} ({best['splits']}) {_nice(best['ms'])} MS", (220, 30, 30))
  cv.text(L, 8, title, axis)
  cv.text(12, T - 16, "MS", axis)
  cv.text((L + W - R) // 2, H - 16, "SPLIT MASK", axis, anchor="center")
  path.write_bytes(cv.png())

# ---------------------------------------------------------------- CLI

def load_module(name: str) -> ModuleType:
  if name.endswith(".py") or "/" in name:
    p = Path(name).resolve()
    if not p.is_file(): raise SystemExit(f"search2: module file {name} does not exist")
    spec = importlib.util.spec_from_file_location(p.stem, p)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[p.stem] = mod
    spec.loader.exec_module(mod)
  else:
    if str(ROOT) not in sys.path: sys.path.insert(0, str(ROOT))
    try: mod = importlib.import_module(name)
    except ImportError as e: raise SystemExit(f"search2: cannot import module '{name}': {e}")
  for attr in ("SPLIT_POINTS", "bench_mask"):
    if not hasattr(mod, attr): raise SystemExit(f"search2: module '{name}' has no {attr}")
  return mod

def parse_bits(spec: str | None, points: Sequence[str]) -> list[int]:
  if not spec: return list(range(len(points)))
  out = []
  for n in spec.split(","):
    n = n.strip()
    if n.isdigit() and int(n) < len(points): out.append(int(n))
    elif n in points: out.append(points.index(n))
    else: raise SystemExit(f"search2: unknown split point '{n}' (choose from {', '.join(points)})")
  return sorted(set(out))

def main(argv: Sequence[str] | None = None, module: ModuleType | None = None, log=print) -> dict:
  argv = list(sys.argv[1:] if argv is None else argv)
  mod_args: list[str] = []
  if "--" in argv: argv, mod_args = argv[:argv.index("--")], argv[argv.index("--") + 1:]
  ap = argparse.ArgumentParser(prog="search2.py", description=__doc__.split("\n\n")[0], allow_abbrev=False)
  ap.add_argument("--module", default="bench_block", help="module with SPLIT_POINTS and bench_mask (name or .py path)")
  ap.add_argument("--mode", default="greedy", choices=("exhaustive", "random", "greedy"))
  ap.add_argument("--samples", type=int, default=32, help="masks measured by --mode random (the base included)")
  ap.add_argument("--repeat", type=int, default=1, help="measurements per (mask, beam); the score is their median")
  ap.add_argument("--iters", type=int, default=20, help="timed steps per measurement (passed to bench_mask)")
  ap.add_argument("--beams", default="0", help="comma list of BEAM levels; more than one couples the search")
  ap.add_argument("--bits", default=None, help="comma list of split points (names or indices) to search; the rest stay as in --base")
  ap.add_argument("--base", type=int, default=None, help="starting / fixed mask (default: the module's DEFAULT_SPLIT_MASK, else 0)")
  ap.add_argument("--min-gain", type=float, default=0.01, help="greedy stops when no flip gains more than this fraction")
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--top", type=int, default=20, help="rows of the ranked table printed")
  ap.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE, help="where results (and the csv/json/png) go")
  a, unknown = ap.parse_known_args(argv)
  mod_args = unknown + mod_args
  mod = module or load_module(a.module)
  modname = getattr(mod, "__name__", "module").rsplit(".", 1)[-1]
  if hasattr(mod, "setup"): mod.setup(mod_args)
  elif mod_args: ap.error(f"module {modname} takes no options, got {' '.join(mod_args)}")
  points = tuple(mod.SPLIT_POINTS)
  try: beams = [int(b) for b in a.beams.split(",") if b.strip()]
  except ValueError: ap.error(f"--beams must be a comma list of integers, got {a.beams!r}")
  if not beams or any(b < 0 for b in beams): ap.error("--beams needs at least one level >= 0")
  if a.repeat < 1 or a.iters < 1: ap.error("--repeat and --iters must be >= 1")
  base = a.base if a.base is not None else int(getattr(mod, "DEFAULT_SPLIT_MASK", 0))
  if not 0 <= base < 1 << len(points): ap.error(f"--base must be in 0..{(1 << len(points)) - 1}")
  free = parse_bits(a.bits, points)
  key = f"{modname}|{mod.cache_key() if hasattr(mod, 'cache_key') else '-'}|points={','.join(points)}|iters={a.iters}"
  stem = f"{modname}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"
  cache = ResultCache(a.cache_dir / f"{stem}.jsonl", key)
  s = Search(mod, cache, beams, a.repeat, a.iters, log)
  log(f"search2: {a.mode} over {len(free)} bits ({', '.join(points[b] for b in free)}), base {base}, beams {beams}, repeat {a.repeat},"
      f" iters {a.iters}; {len(cache.rows)} cached results in {cache.path}")
  t0 = time.perf_counter()
  path: list = []
  if a.mode == "exhaustive": masks = exhaustive(s, base, free)
  elif a.mode == "random": masks = random_sample(s, base, free, a.samples, a.seed)
  else: masks, path = greedy(s, base, free, a.min_gain)
  rows = rank_rows(s, masks)
  # one row per kernel graph, shown by its member with the fewest splits (a set no-op bit would only confuse the default)
  groups: dict[int, list[dict]] = {}
  for r in rows: groups.setdefault(r["same_as"], []).append(r)
  simplest = lambda rs: min(rs, key=lambda r: (bin(r["mask"]).count("1"), r["mask"]))
  distinct = sorted((simplest(rs) for rs in groups.values()), key=lambda r: (r["ms"], r["mask"]))
  aliases = {r["mask"]: len(groups[r["same_as"]]) for r in distinct}
  best, base_ms = distinct[0], s.score(base)[0]
  per_beam_best = {b: simplest([r for r in rows if r["per_beam"][str(b)] == min(x["per_beam"][str(b)] for x in rows)])["mask"] for b in beams}
  log(f"{len(masks)} masks, {len(distinct)} distinct kernel graphs" + (" (graph_key)" if hasattr(mod, "graph_key") else ""))
  log(f"{'rank':>4s} {'mask':>5s} {'bits':>{len(points)}s} {'ms':>10s} {'beam':>4s} {'vs base':>8s} {'masks':>5s}  splits")
  for i, r in enumerate(distinct[:a.top]):
    vs = 100 * (r["ms"] / base_ms - 1)
    log(f"{i + 1:4d} {r['mask']:5d} {r['bits']} {r['ms']:10.4f} {r['beam']:4d} {vs:+7.2f}% {aliases[r['mask']]:5d}  {r['splits']}")
  if len(beams) > 1:
    for b, m in per_beam_best.items(): log(f"best at BEAM={b}: mask {m} ({mask_label(m, points)}) {s.per_beam(m)[b]:.4f} ms")
  note = f"search2 {a.mode}: {best['ms']:.4g} ms vs {base_ms:.4g} ms at mask {base}" + (f", BEAM={best['beam']}" if len(beams) > 1 else "")
  line = default_line(best["mask"], points, note)
  out = {"module": modname, "key": key, "mode": a.mode, "split_points": list(points), "free_bits": [points[b] for b in free], "base": base,
         "base_ms": base_ms, "beams": beams, "repeat": a.repeat, "iters": a.iters, "best": best,
         "per_beam_best": {str(b): {"mask": m, "ms": s.per_beam(m)[b]} for b, m in per_beam_best.items()},
         "greedy_path": [{"mask": m, "ms": ms, "beam": b} for m, ms, b in path], "rows": rows, "measured_now": s.measured,
         "graph_keys_now": s.keyed, "distinct_graphs": len(distinct), "no_op_bits": no_op_bits(s, masks, free),
         "default_line": line, "seconds": round(time.perf_counter() - t0, 2)}
  files = {ext: a.cache_dir / f"{stem}.{ext}" for ext in ("csv", "json", "png")}
  write_csv(files["csv"], rows, beams)
  files["json"].write_text(json.dumps(out, indent=1))
  plot(files["png"], s, rows, base, f"{modname} {a.mode}: ms per split mask")
  out["files"] = {k: str(v) for k, v in files.items()}
  if out["no_op_bits"]: log(f"bits that never changed the kernels here: {', '.join(out['no_op_bits'])}")
  log(f"measured {s.measured} now ({len(cache.rows)} in cache); wrote {files['csv']}, {files['json'].name}, {files['png'].name}")
  log(f"to make it the default, in apps/mla.py:\n  {line}")
  return out

if __name__ == "__main__":
  main()
