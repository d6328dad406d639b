"""The command line: chat with, complete, benchmark or serve a deepseek2-family GGUF model (GLM-4.7-Flash, DeepSeek-V2-Lite,
Youtu-LLM) on the patched tinygrad.

  ./run llm --benchmark 20                            # the default model for this machine: ms/token, tok/s, kernels, GB/s
  ./run llm --model glm-4.7-flash-tiny                # chat (a REPL: /reset, /exit, Ctrl-D)
  ./run llm --model model.gguf --prompt "Once upon a time" --count 64
  ./run llm --model model.gguf --serve 8080 -np 8     # OpenAI-compatible API, 8 requests at once (apps/server.py)

--model takes a GGUF path, a known model name (downloaded once, see apps/models.py) or a synthetic preset (apps/synth.py,
random weights, made once). Without it: the synthetic GLM-4.7-Flash (release mix), tiny on a CPU and full size on a GPU.
Every user error is one line `llm: error: ...` with the fix: exit status 2 for bad flags, 1 for the rest.
"""
from __future__ import annotations
import sys
from pathlib import Path
if not __package__:  # run as a script: import from the repo root, and not from apps/ (its module names shadow others)
  _apps = Path(__file__).resolve().parent
  sys.path[:] = [p for p in sys.path if not p or Path(p).resolve() != _apps]
  sys.path.insert(0, str(_apps.parent))
import argparse, json, os, platform, secrets, shutil, signal, subprocess, time
from dataclasses import dataclass, field, asdict
import apps  # noqa: F401  (the patched tinygrad first on sys.path; before anything imports tinygrad)

from apps import synth, models, KERNEL_PATHS, CACHE_TYPES
from apps.chat import ChatError
from apps.engine import CPU_LIKE, DEFAULT_PRESET, Engine, UserError, note, resolve_model

BENCHMARK_STEPS = 20  # decode steps `--benchmark` times when given no count
BENCH_PROMPT = ("The quick brown fox jumps over the lazy dog. A transformer reads the whole prompt at once, then writes one token at a "
                "time, and each new token reads every active weight of the model once.")

# ---------------------------------------------------------------- sampling flags

def make_params(args, seed_offset: int = 0, greedy: bool = False):
  from apps.sampling import Params
  if greedy: return Params()
  seed = (args.seed + seed_offset) & 0xFFFFFFFF
  return Params(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, min_p=args.min_p, repeat_penalty=args.repeat_penalty,
                repeat_last_n=args.repeat_last_n, seed=seed)

def default_params(seed: int = 1):
  """The sampling a bare `llm.py -p` or a request without sampling fields uses (llama.cpp's chain), with a fixed seed."""
  return make_params(parser().parse_args(["--seed", str(seed)]))

# ---------------------------------------------------------------- modes

def run_prompt(engine: Engine, args) -> int:
  if args.chat:
    msgs = ([{"role": "system", "content": args.system}] if args.system else []) + [{"role": "user", "content": args.prompt}]
    ids = engine.chat_ids(msgs)
  else: ids = engine.text_ids(args.prompt)
  if not ids: raise UserError("--prompt is empty (no tokens): give some text")
  if not engine.fits(len(ids)):
    raise UserError(f"the prompt has {len(ids)} tokens, the context holds {engine.max_context}: shorten it or raise --max-context")
  for piece in engine.complete(ids, args.count, make_params(args), args.stop):
    sys.stdout.write(piece)
    sys.stdout.flush()
  sys.stdout.write("\n")
  if args.verbose: note(engine.stats.line())
  return 0

CHAT_HELP = "commands: /reset starts a new conversation, /exit (or Ctrl-D) quits; Ctrl-C stops a reply"

def run_chat(engine: Engine, args) -> int:
  base = [{"role": "system", "content": args.system}] if args.system else []
  messages = list(base)
  tty = sys.stdin.isatty()
  if tty: note(f"chatting with {engine.name}; {CHAT_HELP}")
  turn = 0
  while True:
    try:
      line = input("> ") if tty else sys.stdin.readline()
    except EOFError: break
    except KeyboardInterrupt:
      print(file=sys.stderr)
      break
    if not tty and not line: break  # end of input
    text = line.rstrip("\r\n")
    cmd = text.strip()
    if not cmd: continue
    if cmd in ("/exit", "/quit"): break
    if cmd == "/help":
      note(CHAT_HELP)
      continue
    if cmd == "/reset":
      messages = list(base)
      engine.model.reset()
      note("new conversation")
      continue
    messages.append({"role": "user", "content": text})
    try: ids = engine.chat_ids(messages)
    except ChatError as e:
      note(f"error: {e}")
      messages.pop()
      continue
    if not engine.fits(len(ids)):
      note(f"error: the conversation ({len(ids)} tokens) no longer fits in the context of {engine.max_context} tokens: "
           "/reset starts over (or raise --max-context)")
      messages.pop()
      continue
    reply: list[str] = []
    try:
      for piece in engine.complete(ids, args.count, make_params(args, turn), args.stop):
        reply.append(piece)
        sys.stdout.write(piece)
        sys.stdout.flush()
    except KeyboardInterrupt:
      engine.model.reset()  # a step cut short may have left the cache half-written: the next turn recomputes it
      engine.stats.finish_reason = "cancelled"
      note("(stopped)")
    sys.stdout.write("\n")
    sys.stdout.flush()
    messages.append({"role": "assistant", "content": "".join(reply)})
    turn += 1
    if args.verbose: note(engine.stats.line())
    if engine.stats.finish_reason == "length" and len(engine.model.cached) + 1 >= engine.max_context:
      note("the context is full: /reset starts over (or raise --max-context)")
  return 0

def device_name(device: str) -> str:
  """tinygrad's device, plus the hardware's name where it is easy to find."""
  base, extra = device.split(":")[0].upper(), ""
  if base in ("CUDA", "NV") and shutil.which("nvidia-smi"):
    try:
      out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=10).stdout
      extra = out.strip().splitlines()[0] if out.strip() else ""
    except (OSError, subprocess.SubprocessError): pass
  elif base == "AMD" and shutil.which("rocm-smi"):
    try: extra = subprocess.run(["rocm-smi", "--showproductname"], capture_output=True, text=True, timeout=10).stdout.strip().splitlines()[-1]
    except (OSError, subprocess.SubprocessError, IndexError): pass
  elif base in CPU_LIKE:
    try: extra = next(ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name"))
    except (OSError, StopIteration): extra = platform.processor() or platform.machine()
    extra += f", {os.cpu_count()} cores"
  return f"{device} ({extra})" if extra else device

def jit_counts(jit) -> tuple[int, int] | None:
  """(kernels, launches) of a captured TinyJit: a graph launch batching several kernels is one launch."""
  from tinygrad.uop.ops import Ops
  captured = getattr(jit, "captured", None)
  if captured is None: return None
  kernels = launches = 0
  for call in captured._linear.src:
    body = call.src[0]
    if body.op is Ops.CUSTOM_FUNCTION and body.arg == "graph": kernels += sum(c.src[0].op is Ops.PROGRAM for c in body.src[0].src)
    elif body.op is Ops.CUSTOM_FUNCTION and body.arg == "hcq": kernels += len(call.arg.aux.kernels)
    else: kernels += body.op is Ops.PROGRAM  # a copy is a launch, not a kernel
    launches += 1
  return kernels, launches

def decode_jit(model, params): return model.decode_jit(params)

@dataclass
class BenchResult:
  device: str
  model: str
  kind: str
  mix: str | None
  file: str
  file_bytes: int
  prompt_tokens: int
  steps: int
  ms_per_token: dict = field(default_factory=dict)  # median, p10, p90
  tok_per_s: float = 0.0
  prefill_tok_per_s: float = 0.0
  kernels_per_token: int | None = None
  launches_per_token: int | None = None
  weight_bytes_per_token: int = 0
  weight_gb_per_s: float = 0.0

def benchmark(engine: Engine, steps: int, prompt: str | None) -> BenchResult:
  import numpy as np
  from apps.sampling import Params
  model, greedy = engine.model, Params()
  ids = engine.text_ids(prompt if prompt is not None else BENCH_PROMPT)
  if not ids: raise UserError("--prompt is empty (no tokens): give some text")
  if len(ids) + steps + 1 > model.max_context:
    raise UserError(f"--benchmark {steps} with a {len(ids)}-token prompt needs {len(ids) + steps + 1} tokens of context, "
                    f"the context holds {model.max_context}: raise --max-context or lower the count")
  note("warming up (the first run of a model compiles its kernels and captures its steps; later runs load them)")
  t0 = time.perf_counter()
  for _ in range(2):   # the prompt's own steps: made (captured or loaded) on the first pass, replayed on the second
    for _ in model.generate(ids, 2, greedy): pass
    model.reset()
  note(f"warm-up took {time.perf_counter() - t0:.1f} s; timing {steps} decode steps")
  t0 = time.perf_counter()
  gen = model.generate(ids, steps + 1, greedy)
  next(gen)
  last = time.perf_counter()
  prefill_s, times = last - t0, []
  for _ in gen:
    now = time.perf_counter()
    times.append(now - last)
    last = now
  model.reset()
  ms = np.array(times) * 1e3
  counts = jit_counts(decode_jit(model, greedy))
  tok_s = len(times) / (sum(times) or 1e-9)
  src = engine.source
  return BenchResult(device=device_name(model.device), model=src.name, kind=src.kind, mix=src.mix, file=str(src.path),
                     file_bytes=src.path.stat().st_size, prompt_tokens=len(ids), steps=len(times),
                     ms_per_token={"median": float(np.median(ms)), "p10": float(np.percentile(ms, 10)), "p90": float(np.percentile(ms, 90))},
                     tok_per_s=tok_s, prefill_tok_per_s=len(ids) / prefill_s,
                     kernels_per_token=counts[0] if counts else None, launches_per_token=counts[1] if counts else None,
                     weight_bytes_per_token=engine.weight_bytes, weight_gb_per_s=engine.weight_bytes * tok_s / 1e9)

def bench_table(r: BenchResult) -> str:
  what = {"preset": f"synthetic preset, {r.mix} mix", "known": "downloaded", "file": "GGUF file"}[r.kind]
  m = r.ms_per_token
  kernels = f"{r.kernels_per_token} kernels, {r.launches_per_token} launches per token" if r.kernels_per_token is not None else "n/a"
  rows = [("device", r.device), ("model", f"{r.model} ({what}), {r.file_bytes / 2**30:.2f} GiB: {r.file}"),
          ("prompt", f"{r.prompt_tokens} tokens; {r.steps} decode steps after warm-up, greedy"),
          ("decode", f"{m['median']:.2f} ms/token median (p10 {m['p10']:.2f}, p90 {m['p90']:.2f}), {r.tok_per_s:.1f} tok/s"),
          ("prefill", f"{r.prefill_tok_per_s:.1f} tok/s (prompt to first token)"), ("kernels", kernels),
          ("weights", f"{r.weight_bytes_per_token / 2**20:.1f} MiB read per token, {r.weight_gb_per_s:.2f} GB/s")]
  return "\n".join(f"{k:8s} {v}" for k, v in rows)

def run_benchmark(engine: Engine, args) -> int:
  r = benchmark(engine, args.benchmark, args.prompt)
  print(json.dumps(asdict(r)) if args.json else bench_table(r), flush=True)
  return 0

# ---------------------------------------------------------------- arguments

class _Parser(argparse.ArgumentParser):
  def error(self, message: str):  # one line, not argparse's usage block
    print(f"{self.prog}: error: {message} (see --help)", file=sys.stderr)
    raise SystemExit(2)

def _int(lo: int, hi: int | None = None):
  def parse(s: str) -> int:
    try: v = int(s)
    except ValueError: raise argparse.ArgumentTypeError(f"'{s}' is not an integer") from None
    if v < lo or (hi is not None and v > hi): raise argparse.ArgumentTypeError(f"{v} is out of range ({lo}..{hi if hi is not None else ''})")
    return v
  return parse

def _context(s: str) -> int | str:
  return s if s == "fit" else _int(2)(s)

def _float(s: str) -> float:
  try: v = float(s)
  except ValueError: raise argparse.ArgumentTypeError(f"'{s}' is not a number") from None
  if v != v or v in (float("inf"), float("-inf")): raise argparse.ArgumentTypeError(f"'{s}' is not a finite number")
  return v

def parser() -> argparse.ArgumentParser:
  ap = _Parser(prog="llm", description="Chat with, complete, benchmark or serve a deepseek2-family GGUF model (MLA + MoE) on tinygrad.",
               epilog="With no --prompt, --benchmark or --serve: an interactive chat.")
  ap.add_argument("-m", "--model", help="a GGUF path, a known model name (downloaded once) or a synthetic preset (default: "
                  f"{DEFAULT_PRESET}, -tiny on a CPU); --list-models lists them")
  ap.add_argument("--mix", help=f"quant mix of a synthetic preset: {', '.join(synth.MIXES)} (default release)")
  ap.add_argument("--device", help="tinygrad device (default: tinygrad's default, e.g. CUDA, NV, CPU)")
  ap.add_argument("--kernels", choices=KERNEL_PATHS, default="hand", help="hand: hand-written kernels where the device has them "
                  "(CUDA, Metal; default); generated: tinygrad's own code generator for every kernel")
  ap.add_argument("--max-context", type=_context, default="fit", help="KV cache length in tokens, at most the model's trained length; "
                  "fit (default): the longest the device's memory holds after the weights (4096 where the device does not say)")
  ap.add_argument("--cache-type", choices=CACHE_TYPES, default="f32", help="the latent cache's elements: f32 (default, exact) or f16 "
                  "(half the memory and the bytes attention reads, as llama.cpp's default; rows rounded to fp16 once)")
  ap.add_argument("--list-models", action="store_true", help="list known model names and synthetic presets")
  g = ap.add_argument_group("generation")
  g.add_argument("-p", "--prompt", help="complete this text (raw, no chat template unless --chat) and exit")
  g.add_argument("--chat", action="store_true", help="with --prompt: send it as a user message through the chat template")
  g.add_argument("--system", help="a system message for the chat")
  g.add_argument("-n", "--count", type=_int(1), default=256, help="most tokens to generate per reply (default 256; also the server's "
                 "max_tokens when a request gives none)")
  g.add_argument("--stop", action="append", default=[], metavar="TEXT", help="stop when this text is generated (repeatable)")
  s = ap.add_argument_group("sampling (llama.cpp's defaults; --temperature 0 is greedy)")
  s.add_argument("--temperature", "--temp", type=_float, default=0.8)
  s.add_argument("--top-k", type=_int(0), default=40, help="0: off")
  s.add_argument("--top-p", type=_float, default=0.95, help="1: off")
  s.add_argument("--min-p", type=_float, default=0.05, help="0: off")
  s.add_argument("--repeat-penalty", type=_float, default=1.0, help="1: off")
  s.add_argument("--repeat-last-n", type=_int(0), default=64)
  s.add_argument("--seed", type=int, default=-1, help="random seed (default -1: a new one each run)")
  b = ap.add_argument_group("benchmark and server")
  b.add_argument("--benchmark", type=_int(1), nargs="?", const=BENCHMARK_STEPS, metavar="N",
                 help=f"time N decode steps (greedy; default {BENCHMARK_STEPS}) and print a table")
  b.add_argument("--json", action="store_true", help="with --benchmark: one JSON object instead of the table")
  b.add_argument("--serve", type=_int(0, 65535), metavar="PORT", help="serve an OpenAI-compatible API on this port (0: any free port)")
  b.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1, this machine only)")
  b.add_argument("--parallel", "-np", type=_int(1, 64), default=None, metavar="N",
                 help="with --serve: requests served at once, each with its own --max-context of cache, in batched decode steps (default 4)")
  b.add_argument("--queue", type=_int(1), default=8, help="requests that may wait for a free slot; more get 503 (default 8)")
  ap.add_argument("-v", "--verbose", action="store_true", help="statistics after each reply; tracebacks for internal errors")
  return ap

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
  ap = parser()
  args = ap.parse_args(argv)
  modes = [f for f, on in (("--prompt", args.prompt is not None and args.benchmark is None), ("--benchmark", args.benchmark is not None),
                           ("--serve", args.serve is not None)) if on]
  if len(modes) > 1: ap.error(f"{' and '.join(modes)} cannot be combined: choose one")
  if args.json and args.benchmark is None: ap.error("--json needs --benchmark")
  if args.parallel is not None and args.serve is None: ap.error("--parallel needs --serve")
  if args.chat and args.prompt is None: ap.error("--chat needs --prompt (without --prompt, llm is a chat already)")
  # Python decodes argv bytes that are not UTF-8 into lone surrogates; tokenizing those would make different bytes
  for flag, text in (("--prompt", args.prompt), ("--system", args.system), *(("--stop", t) for t in args.stop)):
    if text is not None and any("\udc80" <= c <= "\udcff" for c in text): ap.error(f"{flag} is not valid UTF-8 text")
  if args.seed < 0: args.seed = secrets.randbelow(2**32)
  try: make_params(args)
  except ValueError as e: ap.error(f"bad sampling flags: {e}")
  return args

def list_models() -> None:
  print("known models (downloaded once into the cache):")
  for m in models.KNOWN.values(): print(f"  {m.name:28s} {m.title}  [{m.repo}]")
  print("synthetic presets (random weights; --mix " + "|".join(synth.MIXES) + "):")
  for n in synth.PRESETS: print(f"  {n:28s} {synth.PRESETS[n].title}{' (small)' if n.endswith('-tiny') else ''}")

def open_device(device: str | None) -> str:
  """The canonical device name, opened: an unknown or broken device is a one-line error here, not a traceback later."""
  from tinygrad import Device
  try: name = Device.canonicalize(device)
  except Exception as e: raise UserError(f"no tinygrad device works here ({type(e).__name__}: {e}): pass --device (e.g. CPU)") from None
  if name.split(":")[0] not in Device._devices:
    raise UserError(f"unknown --device '{device}': tinygrad has {', '.join(d for d in Device._devices if d not in ('DISK', 'NPY', 'TINYFS'))}")
  try: Device[name]
  except Exception as e: raise UserError(f"device {name} cannot be opened ({type(e).__name__}: {e}): choose another --device") from None
  return name

def run(args) -> int:
  if args.list_models:
    list_models()
    return 0
  args.device = open_device(args.device)
  source = resolve_model(args.model, args.mix, args.device)
  slots = (args.parallel or 4) if args.serve is not None else 1
  engine = Engine.load(source, args.max_context, args.device, kernels=args.kernels, cache_type=args.cache_type, slots=slots)
  if args.benchmark is not None: return run_benchmark(engine, args)
  if args.serve is not None:
    from apps.server import serve
    return serve(engine, args.host, args.serve, make_params(args), queue_size=args.queue, max_tokens=args.count, stop=args.stop)
  if args.prompt is not None: return run_prompt(engine, args)
  return run_chat(engine, args)

def main(argv: list[str] | None = None) -> int:
  args = parse_args(argv)
  signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C works even when started with SIGINT ignored (a background job)
  try: return run(args)
  except KeyboardInterrupt:
    print(file=sys.stderr)
    return 130
  except BrokenPipeError:  # stdout closed early (| head): not an error
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0
  except (UserError, models.DownloadError, ValueError, OSError) as e:  # ValueError: GGUFError, TokenizerError, ChatError, ContextOverflow
    if args.verbose: raise
    msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    print(f"llm: error: {msg}", file=sys.stderr)
    return 1

if __name__ == "__main__": sys.exit(main())
