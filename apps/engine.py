"""The engine: a loaded model with its tokenizer and chat template, text in and streamed text out, and the resolution of
what --model names (a GGUF path, a known model, a synthetic preset) to a file. The CLI (apps/llm.py) and the server
(apps/server.py) both drive it; neither imports the other.
"""
from __future__ import annotations
import os, sys, time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator
from apps import synth, models
from apps.gguf import GGUFFile
from apps.tokenizer import Tokenizer, StreamDecoder
from apps.chat import ChatTemplate, reuse

DEFAULT_PRESET = "glm-4.7-flash"  # the project's main model; "-tiny" on a CPU
CPU_LIKE = ("CPU", "PYTHON", "NULL", "LLVM", "CLANG")

class UserError(Exception):
  """A problem with what the user asked for; main prints it as one line."""

# ---------------------------------------------------------------- models

@dataclass
class Source:
  path: Path
  name: str          # what /v1/models and the benchmark call it
  kind: str          # "preset" (synthetic), "known" (downloaded) or "file"
  mix: str | None = None

def is_cpu(device: str) -> bool: return device.split(":")[0].upper() in CPU_LIKE

def resolve_model(spec: str | None, mix: str | None, device: str | None) -> Source:
  """Find (download or generate when needed) the GGUF file that --model names."""
  if spec is None:
    from tinygrad import Device
    dev = Device.canonicalize(device)
    name = DEFAULT_PRESET + ("-tiny" if is_cpu(dev) else "")
    why = "a CPU runs the tiny variant" if is_cpu(dev) else "a GPU runs the full-size model"
    note(f"no --model: using the synthetic preset {name} ({mix or 'release'} mix, random weights) on {dev}: {why}; --model picks another")
    spec = name
  if spec in synth.PRESETS:
    mix = mix or "release"
    if mix not in synth.MIXES: raise UserError(f"unknown --mix '{mix}' (choose from {', '.join(synth.MIXES)})")
    if not synth.cache_path(spec, mix).exists():
      note(f"generating the synthetic model {spec} ({mix} mix, {synth.file_nbytes(spec, mix) / 2**30:.2f} GiB) once; it is cached")
    return Source(synth.generate(spec, mix), spec, "preset", mix)
  if mix is not None: raise UserError(f"--mix applies to synthetic presets only ({', '.join(synth.PRESETS)}), not to '{spec}'")
  p = Path(spec).expanduser()
  if p.is_dir(): raise UserError(f"{spec} is a directory: pass a .gguf file")
  if p.is_file(): return Source(p, p.stem, "file")
  if (known := models.lookup(spec)) is not None:
    return Source(models.download(known), known.name, "known")
  if "/" in spec or os.sep in spec or spec.lower().endswith(".gguf"): raise UserError(f"no such file: {spec}")
  raise UserError(f"unknown model '{spec}': pass a GGUF path, a known model ({', '.join(m.name for m in models.KNOWN.values())}) "
                  f"or a synthetic preset ({', '.join(synth.PRESETS)}); --list-models lists them")

def note(msg: str) -> None: print(f"llm: {msg}", file=sys.stderr, flush=True)

def _note_step(step: tuple, loaded: bool) -> None:
  """One line as the model makes a prefill or decode step: loaded from .cache/captures, or compiled and captured now."""
  kind, *a = step
  what = {"step": lambda: "the decode step" if a[-1] == 0 else f"the prompt's last chunk ({a[-1]} tokens)",
          "fill": lambda: f"a prefill chunk ({a[0]} tokens)", "logits": lambda: "the logits step",
          "rows": lambda: f"the batched decode step of {a[0]}",
          "mixed": lambda: f"the batched decode step of {a[0]} with a prompt's {'last ' if a[2] else ''}chunk ({a[1]} tokens)"}[kind]()
  note(f"{what}: loaded, compiled before" if loaded else f"{what}: compiling and capturing (once for this model and code: later runs load it)")

@dataclass
class Stats:
  """One completion: token counts, why it ended ("stop", "length" or "cancelled") and its timing."""
  prompt_tokens: int = 0
  reused: int = 0            # prompt tokens whose latents were already in the KV cache
  completion_tokens: int = 0  # tokens of the reply (an EOG token is not counted)
  finish_reason: str = "length"
  prefill_s: float = 0.0      # prompt to first token
  decode_s: float = 0.0       # first to last token
  sampled: int = 0            # tokens drawn, EOG included
  @property
  def decode_tok_s(self) -> float: return (self.sampled - 1) / self.decode_s if self.sampled > 1 and self.decode_s > 0 else 0.0
  def line(self) -> str:
    new = self.prompt_tokens - self.reused
    return (f"prompt {self.prompt_tokens} tokens ({self.reused} cached, {new} in {self.prefill_s:.2f} s), reply {self.completion_tokens} "
            f"tokens, {self.decode_tok_s:.1f} tok/s, finish: {self.finish_reason}")

class StopStrings:
  """Cuts streamed text at the first stop string; holds back a tail that could be the start of one. A stop found in the
  text is final only when no longer stop could still begin before it (stops "<" and "><<": "><" is held, not cut at "<")."""
  def __init__(self, stops: list[str]):
    self.stops, self.buf = [s for s in stops if s], ""
    self.longest = max((len(s) for s in self.stops), default=0)
  def _first_hit(self) -> int | None: return min((i for s in self.stops if (i := self.buf.find(s)) >= 0), default=None)
  def feed(self, text: str) -> tuple[str, bool]:
    """(text that is safe to show, whether a stop string was found)."""
    self.buf += text
    hit = self._first_hit()
    # the earliest position where a stop could begin but is not complete yet (a proper prefix of it ends the buffer)
    pending = next((j for j in range(max(0, len(self.buf) - self.longest), len(self.buf))
                    if any(len(s) > len(self.buf) - j and s.startswith(self.buf[j:]) for s in self.stops)), len(self.buf))
    if hit is not None and hit <= pending:
      out, self.buf = self.buf[:hit], ""
      return out, True
    out, self.buf = self.buf[:pending], self.buf[pending:]  # a hit after `pending` waits for the stop that may begin there
    return out, False
  def end(self) -> tuple[str, bool]:
    """At the end of the stream, nothing held back can grow into a stop any more: (the rest up to a stop in it, found)."""
    hit = self._first_hit()
    out, self.buf = self.buf if hit is None else self.buf[:hit], ""
    return out, hit is not None

class Reply:
  """One completion's tokens to text, for the CLI's generate and the server's batched steps alike: counts and times them in
  `stats`, holds back an incomplete UTF-8 sequence and what could begin a stop string, ends at an EOG token or a stop."""
  def __init__(self, tok: Tokenizer, stats: Stats, stop: list[str] = ()):
    self.tok, self.stats, self.t0 = tok, stats, time.perf_counter()
    self.matcher, self.dec = StopStrings(list(stop)), StreamDecoder(tok)
  def add(self, t: int) -> tuple[str, bool]:
    """(the text safe to show now, whether the reply ended: an EOG token or a stop string; finish_reason "stop" then)."""
    st, now = self.stats, time.perf_counter()
    if st.sampled == 0: st.prefill_s = now - self.t0
    else: st.decode_s = now - self.t0 - st.prefill_s
    st.sampled += 1
    if self.tok.is_eog(t):
      st.finish_reason = "stop"
      return self.end(), True
    st.completion_tokens += 1
    text, hit = self.matcher.feed(self.dec.add(t))
    if hit: st.finish_reason = "stop"
    return text, hit
  def end(self) -> str:
    """The text held back, when the stream ends without a stop (EOG, length): up to a stop string found in it."""
    text, hit = self.matcher.feed(self.dec.flush())
    if not hit:
      rest, hit = self.matcher.end()
      text += rest
    if hit: self.stats.finish_reason = "stop"
    return text

class Engine:
  """A loaded model with its tokenizer and chat template: text in, streamed text out (EOG and stop strings end it)."""

  def __init__(self, model, tok: Tokenizer, tmpl: ChatTemplate, source: Source, weight_bytes: int):
    self.model, self.tok, self.tmpl, self.source = model, tok, tmpl, source
    self.name, self.weight_bytes = source.name, weight_bytes
    self.load_seconds: dict[str, float] = {}   # Engine.load's phases: metadata (with the tokenizer), device, weights
    self.stats = Stats()

  @staticmethod
  def load(source: Source, max_context: int | str | None = None, device: str | None = None, quiet: bool = False, kernels: str = "hand",
           capture_dir: Path | None = None, cache_type: str = "f32", slots: int = 1) -> Engine:
    """The model of `source` with `slots` sequences of cache (batched serving: apps/batching.py), its prefill and decode
    steps kept in capture_dir across processes (.cache/captures by default: apps/captures.py)."""
    from apps.mla import Config, largest_upload
    from apps.readback import Opening
    from apps.model import Transformer
    from apps import captures
    from tinygrad import GlobalCounters, Device
    t_start = time.perf_counter()
    opening = Opening(device)   # the device opens while the file's vocabulary and the tokenizer are read
    try:
      with GGUFFile(source.path) as gf:  # one open file for all of it
        gf.prefetch()   # the weights' pages mapped while the metadata is read and the device opens
        Config.from_gguf(gf)  # the metadata, the tokenizer and the template first: their errors come before the slow part
        opening.reserve(largest_upload(gf), gf.tensor_bytes() if gf.fits_memory() else None)   # to pin, where the machine can spare it
        tok = Tokenizer.from_gguf(gf)
        tmpl = ChatTemplate.from_gguf(gf, tok)
        if not quiet: note(f"loading {source.path} ({source.path.stat().st_size / 2**30:.2f} GiB)")
        t0, tty, mem0 = time.perf_counter(), sys.stderr.isatty(), GlobalCounters.mem_used
        def progress(i: int, n: int) -> None:  # redrawn on a terminal; only the last line otherwise
          if quiet or (not tty and i < n): return
          gib, s = (GlobalCounters.mem_used - mem0) / 2**30, time.perf_counter() - t0
          sys.stderr.write(f"{chr(13) if tty else ''}llm: block {i}/{n} loaded ({gib:.2f} GiB, {s:.1f} s)" + ("\n" if i == n else ""))
          sys.stderr.flush()
        opening.wait()
        t_dev = time.perf_counter()
        model = Transformer(gf, max_context, device, progress=progress, kernels=kernels, capture_dir=capture_dir or captures.default_dir(),
                            cache_type=cache_type, slots=slots)
        Device[model.device].synchronize()   # the uploads are done: the weights' time is theirs
    finally: opening.close()
    t_end = time.perf_counter()
    times = {"metadata": t0 - t_start, "device": t_dev - t0, "weights": t_end - t_dev}
    weights_gb_s = model.weight_bytes() / max(times["weights"], 1e-9) / 1e9
    if not quiet:
      model.captures.on_new = _note_step
      model.captures.on_unsaved = lambda step, e: note(f"could not keep a captured step in {model.captures.dir} ({e}): "
                                                       "the next run captures it again")
      per_token = sum(c.nbytes() for c in model.caches) / model.max_context / slots  # the latent cache: every block's row of a token
      each = f" for each of {slots} sequences" if slots > 1 else ""
      note(f"loaded {source.name} in {t_end - t0:.1f} s on {model.device} (weights at {weights_gb_s:.2f} GB/s), context "
           f"{model.max_context} tokens{each} ({per_token / 1024:.1f} KiB of {cache_type} latent cache a token, "
           f"{per_token * model.max_context * slots / 2**20:.0f} MiB in all)")
    eng = Engine(model, tok, tmpl, source, model.active_weight_bytes())
    eng.load_seconds = times
    return eng

  @property
  def max_context(self) -> int: return self.model.max_context

  def fits(self, n_prompt: int) -> bool:
    """Whether a prompt of n_prompt tokens leaves room for at least one generated token."""
    return n_prompt + 1 <= self.model.max_context

  def chat_ids(self, messages: list[dict], **extra) -> list[int]: return self.tmpl.encode(self.tok, messages, **extra)

  def text_ids(self, text: str) -> list[int]: return self.tok.encode(text, add_special=True, parse_special=True)

  def warmup(self, params=None) -> None:
    """Capture (or load) the prefill and decode steps for this sampler structure: the first call captures, later ones replay."""
    ids = self.text_ids("Hello")
    for _ in range(3):
      for _ in self.model.generate(ids, 3, params): pass
    self.model.reset()

  def complete(self, ids: list[int], max_tokens: int, params=None, stop: list[str] = (),
               cancelled: Callable[[], bool] | None = None) -> Iterator[str]:
    """Stream the reply's text. The cached prefix of ids is reused; self.stats describes the run (also when stopped early)."""
    st = self.stats = Stats(prompt_tokens=len(ids), reused=reuse(self.model.cached, ids)[0] if ids else 0)
    reply = Reply(self.tok, st, stop)
    gen = self.model.generate(ids, max_tokens, params, stop=self.tok.is_eog)
    try:
      for t in gen:
        text, done = reply.add(t)
        if text: yield text
        if done: return
        if cancelled is not None and cancelled():
          st.finish_reason = "cancelled"
          return
      if text := reply.end(): yield text
    finally: gen.close()
