"""Helpers to show that a patch is needed: build the tree with the series up to N-1 and up to N, run a check on each."""
import os, subprocess, sys
from pathlib import Path
import apply_patches as ap

def tree_upto(base: Path, upto: int) -> Path:
  dest = base / f"upto{upto}"
  if not (dest / "tinygrad").is_dir(): ap.materialize(dest, upto)
  return dest

def run_on_tree(tree: Path, code: str, env: dict | None = None) -> subprocess.CompletedProcess:
  """Run python code in a fresh interpreter that imports tinygrad from `tree` (never from the project's upstream/), with a
  disk cache of the tree's own unless env names one: the trees' tinygrad versions are the same, so a program another tree
  lowered and pickled would otherwise be read back here."""
  full_env = {**os.environ, "CACHEDB": str(tree / "cache.db"), **(env or {}), "PYTHONPATH": str(tree)}
  return subprocess.run([sys.executable, "-c", code], env=full_env, capture_output=True, text=True, timeout=600, cwd=tree)

def patch_number(prefix: str) -> int:
  """1-based position in the series of the patch whose file name starts with prefix (e.g. '0001')."""
  matches = [i for i, p in enumerate(ap.read_series(), 1) if p.name.startswith(prefix)]
  assert len(matches) == 1, f"no single patch named {prefix}* in patches/series"
  return matches[0]

def assert_patch_needed(base: Path, prefix: str, code: str, env: dict | None = None) -> None:
  """The check fails on the series without patch `prefix` and passes with it."""
  n = patch_number(prefix)
  without = run_on_tree(tree_upto(base, n - 1), code, env)
  assert without.returncode != 0, f"check passed without patch {prefix}: the test does not show the patch is needed\n{without.stdout}"
  with_it = run_on_tree(tree_upto(base, n), code, env)
  assert with_it.returncode == 0, f"check fails with patch {prefix}:\n{with_it.stdout}\n{with_it.stderr}"
