"""Real tokenizer data from llama.cpp's test vocabularies, shipped inside the llama-cpp-python sdist on PyPI.

The sdist is fetched once (hash-checked), the few files we use are extracted into the cache, and the sdist is dropped.
`vocab_file("deepseek-llm")` -> path of models/ggml-vocab-deepseek-llm.gguf (with .inp/.out test vectors beside it).
Where there is no network, a copy of the sdist can be named with LLAMA_CPP_SDIST=PATH or placed in the cache.
"""
from __future__ import annotations
import contextlib, fcntl, hashlib, os, sys
from pathlib import Path

SDIST = "llama_cpp_python-0.3.36.tar.gz"
SDIST_URL = "https://files.pythonhosted.org/packages/ec/e9/e7de2b0463ea3ffbf0ede6cb21b58c1258a8f6521aae45ca773a59fe7cf3/" + SDIST
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
NAMES = ("deepseek-llm", "deepseek-coder", "llama-bpe", "qwen2", "gpt-2")

def cache_dir() -> Path:
  """Project cache (synthetic models, vocab files): $TINYGRAD_MLA_CACHE or .cache/ in the repo."""
  d = Path(os.environ.get("TINYGRAD_MLA_CACHE") or Path(__file__).resolve().parent.parent / ".cache")
  d.mkdir(parents=True, exist_ok=True)
  return d

@contextlib.contextmanager
def cache_lock(name: str):
  """Held by one process at a time (test workers, two CLIs): whoever makes a cached file makes it once, the rest wait."""
  (d := cache_dir() / "locks").mkdir(exist_ok=True)
  with open(d / name, "w") as f:
    fcntl.flock(f, fcntl.LOCK_EX)
    yield

def _sdist() -> Path:
  given = os.environ.get("LLAMA_CPP_SDIST")
  path = Path(given) if given else cache_dir() / SDIST
  if not path.exists():
    if given: raise RuntimeError(f"LLAMA_CPP_SDIST={given} does not exist")
    print(f"downloading {SDIST} (76 MB, once) for llama.cpp's tokenizer test vocabularies", file=sys.stderr)
    import urllib.request
    try:
      with urllib.request.urlopen(SDIST_URL, timeout=120) as r: data = r.read()
    except Exception as e:
      raise RuntimeError(f"cannot download {SDIST_URL} ({type(e).__name__}): no network? put a copy at {path} or set LLAMA_CPP_SDIST") from None
    if hashlib.sha256(data).hexdigest() != SDIST_SHA256: raise RuntimeError(f"sha256 mismatch for the downloaded {SDIST}")
    path.write_bytes(data)
  elif hashlib.sha256(path.read_bytes()).hexdigest() != SDIST_SHA256: raise RuntimeError(f"sha256 mismatch for {path} (expected {SDIST_SHA256})")
  return path

def vocab_file(name: str = "deepseek-llm") -> Path:
  """Path of llama.cpp's models/ggml-vocab-{name}.gguf, extracted from the pinned sdist and cached."""
  out = cache_dir() / "vocab"
  target = out / f"ggml-vocab-{name}.gguf"
  with cache_lock("vocab"): return target if target.exists() else _extract(out, target, name)

def _extract(out: Path, target: Path, name: str) -> Path:
  out.mkdir(parents=True, exist_ok=True)
  sdist = _sdist()
  prefix = SDIST.removesuffix(".tar.gz") + "/vendor/llama.cpp/models/"
  import tarfile
  with tarfile.open(sdist) as tar:
    for n in NAMES:
      for suffix in ("", ".inp", ".out"):
        try: member = tar.getmember(f"{prefix}ggml-vocab-{n}.gguf{suffix}")
        except KeyError: continue
        (out / f"ggml-vocab-{n}.gguf{suffix}.part").write_bytes(tar.extractfile(member).read())
        os.replace(out / f"ggml-vocab-{n}.gguf{suffix}.part", out / f"ggml-vocab-{n}.gguf{suffix}")
  if not os.environ.get("LLAMA_CPP_SDIST"): sdist.unlink(missing_ok=True)  # keep only the few files we use
  if not target.exists(): raise RuntimeError(f"the llama.cpp sdist has no models/ggml-vocab-{name}.gguf")
  return target
