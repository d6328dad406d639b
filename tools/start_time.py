"""Seconds from process start to the first token, in fresh processes: the first process ever (empty caches) and a second
one (tinygrad's disk cache and the captured steps from the first), with the time to import, to load and to the first token
of a 16-token prompt, and the second process's load by phase (Engine.load_seconds: metadata and tokenizer, the wait for the
device past them, the weights' upload with its GB/s); llama.cpp's in the same run with --llama.

  python3 -m tools.start_time [--presets glm-4.7-flash-tiny,...] [--kernels hand] [--prompt 16] [--repeat N] [--calls] [--llama]
                              [--cli] [--serve SLOTS] [--sampled] [--json PATH]

Each preset runs in a scratch cache of its own (CACHEDB and the capture directory in a temporary folder), so "first" is
a cold start whatever ran before; the model file itself is generated first and read once (it sits in the page cache, as
for a restart). Before any of them, the imports from outside this tree get the bytecode a pip install writes where they
lack it (deps_bytecode: the GPU machine's image carries its packages without it); the second process lists what it still
compiled from source. llama.cpp: `llama-bench -p <prompt> -n 0 -r 1 -ngl 99` timed from spawn to exit, twice; it loads the file and
evaluates the prompt twice (a warm-up and the timed run), so its time is an upper bound of its time to the first token.
"""
from __future__ import annotations
import argparse, importlib.util, json, os, py_compile, subprocess, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

def has_bytecode(src: str) -> bool:
  """Whether Python would load src's cached bytecode rather than compile it: the cache file exists with this interpreter's
  magic and, timestamp-checked, the source's mtime and size (as importlib's SourceFileLoader checks them)."""
  try:
    with open(importlib.util.cache_from_source(src), "rb") as f: h = f.read(16)
    st = os.stat(src)
  except (OSError, ValueError, NotImplementedError): return False
  if len(h) < 16 or h[:4] != importlib.util.MAGIC_NUMBER: return False
  flags = int.from_bytes(h[4:8], "little")
  return bool(flags & 1) or (int.from_bytes(h[8:12], "little") == int(st.st_mtime) & 0xFFFFFFFF and
                             int.from_bytes(h[12:16], "little") == st.st_size & 0xFFFFFFFF)

def outside_sources(modules: dict) -> dict[str, str]:
  """name -> source file of the imported modules that are not this tree's own (whose bytecode the set-up writes): the standard
  library's and the installed packages' (a virtual environment inside the tree counts as outside)."""
  own = lambda f: (p := Path(f).resolve()).is_relative_to(ROOT) and not p.is_relative_to(Path(sys.prefix).resolve())
  return {n: f for n, m in modules.items() if isinstance(f := getattr(m, "__file__", None), str) and f.endswith(".py") and not own(f)}

def write_bytecode(sources: dict[str, str]) -> dict[str, int]:
  """Bytecode for each source that has none (or a stale one), where it can be written: {top-level package: modules compiled}."""
  done: dict[str, int] = {}
  for name, src in sources.items():
    if has_bytecode(src): continue
    try: py_compile.compile(src, doraise=True)
    except (py_compile.PyCompileError, OSError): continue
    done[name.split(".")[0]] = done.get(name.split(".")[0], 0) + 1
  return done

IMPORTS = "import apps, apps.engine, apps.chat, apps.tokenizer, tinygrad"   # what a measured process imports before its load

def deps_bytecode() -> dict[str, int]:
  """The bytecode a pip install (or a distribution's package) writes for what the engine imports from outside this tree,
  where it is missing: the GPU machine's image carries numpy, regex and jinja2 without it and sets PYTHONDONTWRITEBYTECODE,
  so each of its processes compiled them again (0.3-0.5 s of a second process's imports there), which a `./run` set-up,
  whose pip writes theirs, never pays. Returns {top-level package: modules compiled}."""
  exec(IMPORTS, {})   # here: this process goes on to import them anyway
  return write_bytecode(outside_sources(sys.modules))

def time_calls() -> dict[str, list]:
  """Wrap the load's steps with wall-clock timers: the loader's own (apps.packed, apps.readback, apps.quantized) and, where the
  default device is CUDA, every driver call of tinygrad's bindings. Returns the live table: name -> [calls, seconds, the
  longest]. The steps nest (an upload holds its copies), so their times overlap."""
  import functools
  from tinygrad import Device
  from apps import packed, readback, quantized
  stats: dict[str, list] = {}
  def timed(name, fn):
    @functools.wraps(fn)
    def f(*a, **k):
      t0 = time.perf_counter()
      try: return fn(*a, **k)
      finally:
        s, dt = stats.setdefault(name, [0, 0.0, 0.0]), time.perf_counter() - t0
        s[0], s[1], s[2] = s[0] + 1, s[1] + dt, max(s[2], dt)
    return f
  for mod, names in ((packed, ("_blocks", "copy_host", "split_blocks", "device_empty", "to_device_stacked")),
                     (readback, ("_memmove", "_copy_in")), (quantized, ("load_tensor",))):
    for n in names: setattr(mod, n, timed(f"{mod.__name__.split('.')[-1]}.{n}", getattr(mod, n)))
  for cls, names in ((readback._Staging, ("_take", "split", "lend", "copy", "reserve")), (packed.PackedTensor, ("upload",)),
                     (readback.Opening, ("wait",))):
    for n in names:
      f = timed(f"{cls.__name__}.{n}", getattr(cls, n))
      setattr(cls, n, staticmethod(f) if isinstance(cls.__dict__[n], staticmethod) else f)
  if Device.DEFAULT.split(":")[0] == "CUDA":
    import tinygrad.runtime.autogen.cuda as cuda
    for n in dir(cuda):
      if n.startswith("cu") and callable(getattr(cuda, n)): setattr(cuda, n, timed(n, getattr(cuda, n)))
  return stats

def child(preset: str, kernels: str, n_prompt: int, capture_dir: str, calls: bool = False, sampled: bool = False) -> None:
  """Runs in the measured process: prints one JSON line of wall-clock times (time.time()) at each stage (with `calls`, the
  load's steps and driver calls timed too: time_calls); the first token greedy, or with `sampled` drawn with the CLI's
  default sampling (llama.cpp's chain)."""
  t = {"start_python": time.time()}
  import apps  # noqa: F401
  from apps import engine
  from tinygrad import Device
  t["imported"] = time.time()
  assert all(m in sys.modules for m in IMPORTS.removeprefix("import ").split(", ")), "IMPORTS names what this process imports first"
  stats = time_calls() if calls else {}
  src = engine.resolve_model(preset, None, None)
  eng = engine.Engine.load(src, max_context=1024, quiet=True, kernels=kernels, capture_dir=Path(capture_dir))
  Device[eng.model.device].synchronize()
  t["loaded"] = time.time()
  load_calls = {k: list(v) for k, v in stats.items()}
  ids = (eng.text_ids("The quick brown fox jumps over the lazy dog. " * 8))[:n_prompt]
  from apps.llm import default_params
  first = next(eng.model.generate(ids, 1, default_params() if sampled else None))
  t["first_token"] = time.time()
  no_bc = sorted(n for n, f in outside_sources(sys.modules).items() if not has_bytecode(f))
  print(json.dumps({**t, "token": first, "captures_loaded": eng.model.captures.loaded, "device": eng.model.device, "no_bytecode": no_bc,
                    "file_bytes": src.path.stat().st_size, "load_s": t["loaded"] - t["imported"], "phases": eng.load_seconds,
                    "weight_bytes": eng.model.weight_bytes(), "load_calls": load_calls}), flush=True)

def run_child(preset: str, kernels: str, n_prompt: int, scratch: Path, calls: bool = False, sampled: bool = False) -> dict:
  env = {**os.environ, "CACHEDB": str(scratch / "cache.db"), "PYTHONPATH": str(ROOT)}
  t0 = time.time()
  p = subprocess.run([sys.executable, "-m", "tools.start_time", "--child", preset, kernels, str(n_prompt), str(scratch / "captures"),
                      "calls" if calls else "-", "sampled" if sampled else "-"],
                     env=env, cwd=ROOT, capture_output=True, text=True)
  if p.returncode: raise SystemExit(f"start_time: {preset} failed:\n{p.stderr[-3000:]}")
  r = json.loads(p.stdout.strip().splitlines()[-1])
  return {"import_s": r["imported"] - t0, "load_s": r["loaded"] - r["imported"], "first_token_s": r["first_token"] - t0,
          "to_first_token_after_load_s": r["first_token"] - r["loaded"], "captures_loaded": r["captures_loaded"], "token": r["token"],
          "device": r["device"], "load_gb_s": r["file_bytes"] / max(r["loaded"] - r["imported"], 1e-9) / 1e9,
          "load_phases_s": r["phases"], "weights_gb_s": r["weight_bytes"] / max(r["phases"]["weights"], 1e-9) / 1e9,
          "load_calls": r["load_calls"], "no_bytecode": r["no_bytecode"]}

def cli_ttft(preset: str, kernels: str, n_prompt: int, scratch: Path, sampled: bool = False) -> float:
  """Seconds from starting `llm.py -p` (the CLI as a user runs it: its device, load and captures in .cache/captures) to the
  first byte it prints: the first token of a prompt of about n_prompt words, greedy (with `sampled`: the CLI's default
  sampling, seeded)."""
  text = " ".join(("The quick brown fox jumps over the lazy dog. " * 8).split()[:n_prompt])
  env = {**os.environ, "CACHEDB": str(scratch / "cache.db")}
  t0 = time.time()
  p = subprocess.Popen([sys.executable, "apps/llm.py", "--model", preset, "--kernels", kernels, "--max-context", "1024", "-p", text,
                        "-n", "1", *(["--seed", "1"] if sampled else ["--temperature", "0"])],
                       env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
  first = p.stdout.read(1)
  t = time.time() - t0
  _, err = p.communicate()
  if p.returncode or not first: raise SystemExit(f"start_time: llm.py -p failed on {preset}:\n{err.decode()[-3000:]}")
  return t

def serve_ready(preset: str, kernels: str, slots: int, scratch: Path) -> tuple[float, float]:
  """Seconds from starting `llm.py --serve` with `slots` slots to its /health answering (the load and the one-request
  steps captured, or loaded from the captures of an earlier server in `scratch`) and to its warmup's last capture (the
  batched steps, made while the server is idle: /health's "warming" at 0)."""
  import socket, urllib.request
  from apps.vocab import cache_dir
  (scratch / "serve").mkdir(exist_ok=True)
  for sub in ("models", "vocab"):   # the files themselves from the project's cache; the captures the scratch's own
    if not (link := scratch / "serve" / sub).exists(): link.symlink_to(cache_dir() / sub)
  with socket.socket() as sk:
    sk.bind(("127.0.0.1", 0))
    port = sk.getsockname()[1]
  env = {**os.environ, "CACHEDB": str(scratch / "cache.db"), "TINYGRAD_MLA_CACHE": str(scratch / "serve")}
  t0, ready = time.time(), None
  p = subprocess.Popen([sys.executable, "apps/llm.py", "--model", preset, "--kernels", kernels, "--max-context", "1024", "--serve",
                        str(port), "--parallel", str(slots)], env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
  try:
    while p.poll() is None:
      try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r: warming = json.loads(r.read())["warming"]
        ready = ready or time.time() - t0
        if not warming: return ready, time.time() - t0
      except OSError: pass
      time.sleep(0.05)
    raise SystemExit(f"start_time: llm.py --serve failed on {preset}:\n{p.stderr.read().decode()[-3000:]}")
  finally:
    p.terminate()
    p.communicate(timeout=60)

def llama_ttft(path: Path, n_prompt: int) -> float:
  from tools import llama_bench
  t0 = time.time()
  p = subprocess.run([str(llama_bench.binary()), "-m", str(path), "-p", str(n_prompt), "-n", "0", "-r", "1", "-ngl", "99", "-o", "json"],
                     capture_output=True, text=True)
  if p.returncode: raise SystemExit(f"start_time: llama-bench failed on {path}:\n{p.stderr[-2000:]}")
  return time.time() - t0

def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--presets", default="glm-4.7-flash-tiny,deepseek-v2-lite-tiny,youtu-llm-2b-tiny")
  ap.add_argument("--kernels", default="hand", choices=("hand", "generated"))
  ap.add_argument("--prompt", type=int, default=16, help="prompt tokens (default 16)")
  ap.add_argument("--repeat", type=int, default=1, help="second processes (default 1): the line gives the median one's times and "
                  "the range of their first tokens (a host's start varies by a few tenths of a second)")
  ap.add_argument("--llama", action="store_true", help="llama.cpp's time too (llama-bench built by tools.llama_bench build)")
  ap.add_argument("--json", type=Path)
  ap.add_argument("--calls", action="store_true", help="the second process's load step by step: the loader's steps and (CUDA) "
                  "driver calls, their count, seconds and longest (time_calls)")
  ap.add_argument("--cli", action="store_true", help="the CLI's own time too: llm.py -p to the first byte it prints, 1 + repeat "
                  "runs, the slowest dropped (the first may capture its steps)")
  ap.add_argument("--serve", type=int, default=0, metavar="SLOTS", help="the server's time too: llm.py --serve with SLOTS slots to "
                  "its /health answering and to its warmup's last capture, a first server and 1 + repeat later ones, the slowest dropped")
  ap.add_argument("--sampled", action="store_true", help="the measured first tokens drawn with the CLI's default sampling (llama.cpp's "
                  "chain: its own captured steps) instead of greedy")
  ap.add_argument("--child", nargs=6, help=argparse.SUPPRESS)
  a = ap.parse_args(argv)
  if a.child:
    child(a.child[0], a.child[1], int(a.child[2]), a.child[3], a.child[4] == "calls", a.child[5] == "sampled")
    return 0
  compiled = deps_bytecode()
  print("bytecode written for the imports outside this tree that had none, as a pip install writes it: " +
        (", ".join(f"{k} {v}" for k, v in sorted(compiled.items(), key=lambda kv: -kv[1])) if compiled else "none missing"), flush=True)
  import apps  # noqa: F401
  from apps import synth
  rows = []
  for preset in a.presets.split(","):
    path = synth.generate(preset, "release")
    with open(path, "rb") as f:
      while f.read(1 << 26): pass  # into the page cache
    with tempfile.TemporaryDirectory(prefix="start_time-") as d:
      first = run_child(preset, a.kernels, a.prompt, Path(d), sampled=a.sampled)
      seconds = sorted((run_child(preset, a.kernels, a.prompt, Path(d), a.calls, a.sampled) for _ in range(max(1, a.repeat))),
                       key=lambda r: r["first_token_s"])
      cli = sorted(cli_ttft(preset, a.kernels, a.prompt, Path(d), a.sampled) for _ in range(1 + max(1, a.repeat)))[:-1] if a.cli else []
      serve = [serve_ready(preset, a.kernels, a.serve, Path(d)) for _ in range(2 + max(1, a.repeat))] if a.serve else []
    runs = {"first": first, "second": seconds[len(seconds) // 2]}
    row = {"preset": preset, "kernels": a.kernels, "sampled": a.sampled, **runs, "seconds_first_token_s": [r["first_token_s"] for r in seconds]}
    if cli: row["cli_first_token_s"] = cli
    if serve:
      row["serve_ready_s"] = {"slots": a.serve, "first": serve[0][0], "later": sorted(r for r, _ in serve[1:])[:-1]}
      row["serve_warm_s"] = {"slots": a.serve, "first": serve[0][1], "later": sorted(w for _, w in serve[1:])[:-1]}
    if a.llama: row["llama"] = {"first": llama_ttft(path, a.prompt), "second": llama_ttft(path, a.prompt)}
    rows.append(row)
    f, s = runs["first"], runs["second"]
    print(f"{preset:24s} {f['device']:5s} {'(default sampling) ' if a.sampled else ''}first: import {f['import_s']:.1f} s, "
          f"load {f['load_s']:.1f} s ({f['load_gb_s']:.2f} GB/s), "
          f"first token at {f['first_token_s']:.1f} s | second: import {s['import_s']:.1f} s, load {s['load_s']:.1f} s "
          f"({s['load_gb_s']:.2f} GB/s), first token at {s['first_token_s']:.1f} s ({s['captures_loaded']} captures loaded)"
          + (f" [median of {len(seconds)}: {seconds[0]['first_token_s']:.2f}-{seconds[-1]['first_token_s']:.2f} s]" if len(seconds) > 1 else "")
          + (f" | llm.py -p: first token at {cli[len(cli) // 2]:.2f} s ({cli[0]:.2f}-{cli[-1]:.2f})" if cli else "")
          + (f" | llm.py --serve ({a.serve} slots) ready at {serve[0][0]:.1f} s (warm at {serve[0][1]:.1f}), later "
             f"{(sv := row['serve_ready_s']['later'])[len(sv) // 2]:.2f} s ({sv[0]:.2f}-{sv[-1]:.2f}; warm at "
             f"{(sw := row['serve_warm_s']['later'])[len(sw) // 2]:.2f})" if serve else "")
          + (f" | llama.cpp {row['llama']['first']:.1f} / {row['llama']['second']:.1f} s" if a.llama else ""), flush=True)
    ph = s["load_phases_s"]
    print(f"{'':30s} second load: metadata and tokenizer {ph['metadata']:.2f} s, the device's opening past them {ph['device']:.2f} s, "
          f"weights {ph['weights']:.2f} s ({s['weights_gb_s']:.2f} GB/s)", flush=True)
    if a.calls:
      print(f"{'':30s} second load, step by step (calls, seconds, the longest; nested steps overlap):", flush=True)
      for k, (n, tot, mx) in sorted(s["load_calls"].items(), key=lambda kv: -kv[1][1])[:16]:
        print(f"{'':32s}{k:28s} {n:6d} {tot * 1e3:9.1f} ms  max {mx * 1e3:7.2f} ms", flush=True)
    if f["token"] != s["token"]: print(f"  the first token differs between the runs: {f['token']} vs {s['token']}", flush=True)
    if s["no_bytecode"]: print(f"  compiled from source in the second process (no bytecode): {', '.join(s['no_bytecode'][:20])}", flush=True)
    if a.json: a.json.write_text(json.dumps(rows, indent=1))
  return 0

if __name__ == "__main__":
  sys.exit(main())
