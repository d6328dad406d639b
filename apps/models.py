"""Known real models: a name -> the Hugging Face URL of its GGUF file, downloaded once into the cache with a progress bar.

  python apps/llm.py --model GLM-4.7-Flash-Q4_0     # downloads (where there is a network), then runs it

Names are the GGUF file names (matched without case). The repositories are the usual community conversions; the files are
large (GLM-4.7-Flash Q4_0 is about 17 GB). Downloads go to <cache>/models/<file>.part and are renamed when complete, so an
interrupted download never looks finished. Every failure is a DownloadError with one line that says what to do instead.
$HF_ENDPOINT (the Hugging Face hub's own variable) points the downloads at a mirror.
"""
from __future__ import annotations
import os, sys, time, urllib.parse
from dataclasses import dataclass
from pathlib import Path
from apps.vocab import cache_dir

@dataclass(frozen=True)
class KnownModel:
  name: str       # also the file name, less .gguf
  repo: str       # Hugging Face repository
  title: str

  @property
  def filename(self) -> str: return self.name + ".gguf"
  def url(self, endpoint: str | None = None) -> str:
    base = (endpoint or os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")
    return f"{base}/{self.repo}/resolve/main/{urllib.parse.quote(self.filename)}"

# Q4_0 releases of the three deepseek2-family models this project runs. Older uploads of DeepSeek-V2-Lite predate llama.cpp's
# absorbed-MLA layout (attn_k_b / attn_v_b); the loader names that case and asks for a re-conversion.
KNOWN: dict[str, KnownModel] = {m.name.lower(): m for m in (
  KnownModel("GLM-4.7-Flash-Q4_0", "unsloth/GLM-4.7-Flash-GGUF", "GLM-4.7-Flash (30B-A3B MoE, MLA), Q4_0"),
  KnownModel("DeepSeek-V2-Lite-Chat-Q4_0", "bartowski/DeepSeek-V2-Lite-Chat-GGUF", "DeepSeek-V2-Lite-Chat (16B-A2.4B MoE, MLA), Q4_0"),
  KnownModel("Youtu-LLM-2B-Q4_0", "tencent/Youtu-LLM-2B-GGUF", "Youtu-LLM-2B (dense, MLA), Q4_0"),
)}

TIMEOUT = 20.0  # seconds for name resolution, connecting and each read: a dead network fails instead of hanging

class DownloadError(RuntimeError):
  """A download that cannot happen; the message is one line with the fix."""

def lookup(name: str) -> KnownModel | None: return KNOWN.get(name.lower())

def cached_path(m: KnownModel, root: Path | None = None) -> Path: return (root or cache_dir()) / "models" / m.filename

def _resolve(host: str, port: int, timeout: float) -> None:
  """getaddrinfo with a deadline (it ignores socket timeouts and can block for a long time without a network)."""
  import socket, threading
  out: list = []
  def run():
    try: out.append(socket.getaddrinfo(host, port))
    except OSError as e: out.append(e)
  t = threading.Thread(target=run, daemon=True)
  t.start()
  t.join(timeout)
  if not out: raise TimeoutError(f"resolving {host} took over {timeout:.0f} s")
  if isinstance(out[0], OSError): raise out[0]

class _Bar:
  """One progress line on stderr, redrawn in place on a terminal (a line every 10 s otherwise)."""
  def __init__(self, label: str, total: int | None):
    self.label, self.total, self.done, self.t0, self.last = label, total, 0, time.perf_counter(), 0.0
    self.tty = sys.stderr.isatty()
  def update(self, n: int, final: bool = False) -> None:
    self.done += n
    now = time.perf_counter()
    if not final and now - self.last < (0.2 if self.tty else 10.0): return
    self.last = now
    rate = self.done / max(now - self.t0, 1e-9) / 2**20
    if self.total:
      frac = self.done / self.total
      line = f"{self.label} [{'#' * int(30 * frac):<30}] {100 * frac:5.1f}% {self.done / 2**30:.2f}/{self.total / 2**30:.2f} GiB {rate:6.1f} MiB/s"
    else: line = f"{self.label} {self.done / 2**30:.2f} GiB {rate:6.1f} MiB/s"
    sys.stderr.write(("\r" if self.tty else "") + line + ("\n" if final or not self.tty else ""))
    sys.stderr.flush()

def download(m: KnownModel, root: Path | None = None, endpoint: str | None = None, progress: bool = True, timeout: float = TIMEOUT) -> Path:
  """The cached file of `m`, downloaded first when missing."""
  path = cached_path(m, root)
  if path.exists(): return path
  import http.client, urllib.error, urllib.request   # here: a start that downloads nothing does not import them (~25 ms)
  url = m.url(endpoint)
  fix = "pass a GGUF path or a synthetic preset (--model glm-4.7-flash)"
  parts = urllib.parse.urlsplit(url)
  try:
    _resolve(parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80), timeout)
    resp = urllib.request.urlopen(urllib.request.Request(url, headers={"User-Agent": "tinygrad-mla"}), timeout=timeout)
  except urllib.error.HTTPError as e:
    raise DownloadError(f"cannot download {m.name}: HTTP {e.code} from {url}: {fix}") from None
  except (urllib.error.URLError, OSError) as e:
    reason = getattr(e, "reason", e)
    raise DownloadError(f"cannot download {m.name} (no network: {reason}): {fix}") from None
  path.parent.mkdir(parents=True, exist_ok=True)
  part = path.with_name(path.name + ".part")
  total = int(resp.headers.get("Content-Length") or 0) or None
  bar = _Bar(f"downloading {m.filename}", total) if progress else None
  try:
    with resp, open(part, "wb") as f:
      while chunk := resp.read(1 << 20):
        f.write(chunk)
        if bar: bar.update(len(chunk))
    if bar: bar.update(0, final=True)
    if total is not None and part.stat().st_size != total:
      raise DownloadError(f"cannot download {m.name}: the connection closed after {part.stat().st_size} of {total} bytes: run again")
  except (OSError, http.client.HTTPException) as e:
    raise DownloadError(f"cannot download {m.name}: {e or type(e).__name__}: run again, or {fix}") from None
  part.replace(path)
  return path
