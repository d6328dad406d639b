"""The identity of upstream/tinygrad: the pin (upstream/PIN), the patch series (patches/series) and the stamp the tree was
built with. apply_patches.py builds the tree from these; apps checks, before it imports tinygrad, that the tree in use is
the one they name. This module imports nothing but the standard library, so both can use it before the tree exists."""
from __future__ import annotations
import hashlib, json
from pathlib import Path

ROOT = Path(__file__).resolve().parent
UPSTREAM, PATCHES = ROOT / "upstream", ROOT / "patches"
TREE, STAMP, CACHE = UPSTREAM / "tinygrad", UPSTREAM / ".stamp", UPSTREAM / ".cache"

class PatchError(Exception):
  """A one-line, user-facing error."""

def read_pin() -> dict[str, str]:
  pin = {}
  for line in (UPSTREAM / "PIN").read_text().splitlines():
    if line.strip() and not line.lstrip().startswith("#"):
      k, _, v = line.partition("=")
      pin[k.strip()] = v.strip()
  for k in ("version", "wheel", "url", "sha256"):
    if k not in pin: raise PatchError(f"upstream/PIN has no '{k} = ...' line")
  return pin

def read_series(patch_dir: Path = PATCHES) -> list[Path]:
  """quilt convention: one patch file name per line, '#' comments and blank lines ignored, applied top to bottom."""
  series_file = patch_dir / "series"
  if not series_file.exists(): raise PatchError(f"{series_file} is missing")
  names = [l.split("#", 1)[0].strip() for l in series_file.read_text().splitlines()]
  names = [n for n in names if n]
  for n in names:
    if " " in n: raise PatchError(f"series entry '{n}': options after the patch name are not supported (all patches are -p1)")
    if not (patch_dir / n).is_file(): raise PatchError(f"series names '{n}', which is not a file in {patch_dir.name}/")
  if len(set(names)) != len(names): raise PatchError("series names a patch twice")
  unlisted = sorted(p.name for p in patch_dir.glob("*.patch") if p.name not in names)
  if unlisted: raise PatchError(f"{patch_dir.name}/{unlisted[0]} has no series entry: add it to {patch_dir.name}/series or delete it")
  return [patch_dir / n for n in names]

def series_key(upto: int | None = None, patch_dir: Path = PATCHES) -> str:
  """Identity of (pin, first `upto` patches): what a materialized tree was built from. Also the patch-series id benchmarks print."""
  h = hashlib.sha256(read_pin()["sha256"].encode())
  for p in read_series(patch_dir)[:upto]: h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
  return h.hexdigest()[:16]

def read_stamp() -> dict:
  try: return json.loads(STAMP.read_text())
  except (OSError, ValueError): return {}

def tree_problem(upto: str | None = None) -> str | None:
  """Why upstream/tinygrad is not the tree of the pin and the first `upto` patches (all of them by default), or None.
  `upto` as a string is TINYGRAD_UPTO: the apps run on the first N patches on purpose (`apply_patches.py --upto N`)."""
  try:
    upto = upto or str(len(read_series()))
    if not upto.isdigit(): return f"TINYGRAD_UPTO={upto!r} is not a number of patches"
    stamp, want = read_stamp(), int(upto)
    if not TREE.is_dir() or not stamp: return "upstream/tinygrad is missing"
    if stamp.get("upto") != want: return f"upstream/tinygrad has {stamp.get('upto')}/{stamp.get('total')} patches (--upto)"
    if stamp.get("key") != series_key(want): return "upstream/tinygrad is stale (the pin or patches/ changed since it was applied)"
  except PatchError as e: return str(e)
  return None
