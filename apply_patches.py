#!/usr/bin/env python3
"""Materialize upstream/tinygrad: the pinned tinygrad wheel, extracted pristine, with patches/ applied in series order.

  python apply_patches.py                 apply the whole series (a no-op when nothing changed)
  python apply_patches.py --wheel PATH    use a local copy of the pinned wheel instead of downloading it
  python apply_patches.py --upto N        apply only the first N patches (for bisecting; the apps refuse such a tree)
  python apply_patches.py --check         check that every patch applies; writes nothing
  python apply_patches.py --list          the series, one line per patch with its subject
  python apply_patches.py --export N DIR  write patch N as a git-am-able mail into DIR, for proposing upstream (with the
                                         earlier patches it needs; --onto CHECKOUT rebases them onto a tinygrad checkout)

The tree is built in a scratch folder and swapped in only when every patch applied, so a failing patch never
leaves a half-patched tree. Patches are plain unified diffs inside git format-patch mails, applied here by a
small exact-context applier (no fuzz), so no `patch`/`git` binary is needed and errors name the failing hunk.
"""
from __future__ import annotations
import argparse, compileall, hashlib, json, os, re, shutil, sys, tempfile, urllib.request, zipfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from patchset import CACHE, PATCHES, STAMP, TREE, UPSTREAM, PatchError, read_pin, read_series, read_stamp, series_key

def tree_hash(tree: Path) -> str:
  h = hashlib.sha256()
  for f in sorted(tree.rglob("*")):
    if f.is_file() and "__pycache__" not in f.parts: h.update(str(f.relative_to(tree)).encode() + b"\0" + f.read_bytes() + b"\0")
  return h.hexdigest()[:16]

# ---------------------------------------------------------------- the pinned wheel

def fetch_wheel(wheel: Path | None = None) -> Path:
  pin = read_pin()
  if wheel is None:
    wheel = CACHE / pin["wheel"]
    if not wheel.exists():
      CACHE.mkdir(parents=True, exist_ok=True)
      print(f"downloading {pin['wheel']} from PyPI", file=sys.stderr)
      try:
        with urllib.request.urlopen(pin["url"], timeout=60) as r: data = r.read()
      except Exception as e:
        raise PatchError(f"cannot download {pin['url']} ({type(e).__name__}: {e}); no network? pass --wheel PATH to a local copy") from None
      tmp = wheel.with_suffix(".part")
      tmp.write_bytes(data)
      os.replace(tmp, wheel)
  if not wheel.is_file(): raise PatchError(f"wheel {wheel} does not exist")
  digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
  if digest != pin["sha256"]:
    raise PatchError(f"sha256 mismatch for {wheel}: expected {pin['sha256']} (upstream/PIN), got {digest}")
  if not (cached := CACHE / pin["wheel"]).exists():  # a local copy given once serves later runs too
    CACHE.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(wheel, cached)
  return wheel

def extract_pristine(wheel: Path, dest: Path) -> None:
  """Extract the wheel's tinygrad/ package into dest/tinygrad (dist-info is left out)."""
  with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
      name = info.filename
      if not name.startswith("tinygrad/") or name.endswith("/"): continue
      if ".." in Path(name).parts or name.startswith("/"): raise PatchError(f"wheel member with unsafe path: {name}")
      out = dest / name
      out.parent.mkdir(parents=True, exist_ok=True)
      out.write_bytes(z.read(info))

# ---------------------------------------------------------------- patches: parse and apply

@dataclass
class Hunk:
  header: str
  old_start: int
  lines: list[tuple[str, str]]  # (' '|'-'|'+', text including its newline, if any)
  def old(self) -> list[str]: return [t for c, t in self.lines if c in " -"]
  def new(self) -> list[str]: return [t for c, t in self.lines if c in " +"]

@dataclass
class FilePatch:
  old_path: str | None  # None for a new file
  new_path: str | None  # None for a deleted file
  hunks: list[Hunk] = field(default_factory=list)

@dataclass
class Patch:
  path: Path
  author: str
  date: str
  subject: str
  body: str
  diff: str
  files: list[FilePatch]

def _strip_prefix(p: str) -> str | None:
  p = p.split("\t")[0].strip()
  if p == "/dev/null": return None
  if p[:2] in ("a/", "b/"): return p[2:]
  raise PatchError(f"diff path '{p}' has no a/ or b/ prefix (patches are -p1, relative to a tinygrad checkout)")

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")

def parse_patch(path: Path) -> Patch:
  text = path.read_text()
  lines = text.splitlines(keepends=True)
  # mail header: From:, Date:, Subject: (folded lines continue with whitespace); body until the '---' line
  headers: dict[str, str] = {}
  i, last = 0, None
  while i < len(lines) and lines[i].strip():
    l = lines[i]
    if l[0] in " \t" and last: headers[last] += " " + l.strip()
    elif ":" in l and not l.startswith("From "):
      last, _, v = l.partition(":")
      headers[last] = v.strip()
    i += 1
  subject = re.sub(r"^\[PATCH[^\]]*\]\s*", "", headers.get("Subject", ""))
  if not subject: raise PatchError(f"{path.name}: no 'Subject:' header (patches are git format-patch mails)")
  body_start = i
  while i < len(lines) and lines[i].rstrip("\n") != "---" and not lines[i].startswith("diff --git "): i += 1
  if i == len(lines): raise PatchError(f"{path.name}: no '---' line before the diff")
  body = "".join(lines[body_start:i]).strip("\n")
  diff_start = i + 1 if lines[i].rstrip("\n") == "---" else i
  files: list[FilePatch] = []
  j = diff_start
  while j < len(lines):
    l = lines[j]
    if l.startswith("--- ") and j + 1 < len(lines) and lines[j + 1].startswith("+++ "):
      files.append(FilePatch(_strip_prefix(l[4:]), _strip_prefix(lines[j + 1][4:])))
      j += 2
      continue
    m = _HUNK.match(l)
    if m:
      if not files: raise PatchError(f"{path.name}: hunk before any '---/+++' file header")
      old_len = int(m.group(2) if m.group(2) is not None else 1)
      new_len = int(m.group(4) if m.group(4) is not None else 1)
      hunk = Hunk(l.rstrip("\n"), int(m.group(1)), [])
      j += 1
      seen_old = seen_new = 0
      while j < len(lines) and (seen_old < old_len or seen_new < new_len or (j < len(lines) and lines[j].startswith("\\"))):
        hl = lines[j]
        if hl.startswith("\\"):  # "\ No newline at end of file" applies to the previous line
          if hunk.lines: c, t = hunk.lines[-1]; hunk.lines[-1] = (c, t.rstrip("\n"))
        elif hl[:1] in (" ", "-", "+") or hl in ("\n",):
          c = hl[0] if hl != "\n" else " "
          hunk.lines.append((c, hl[1:] if hl != "\n" else "\n"))
          seen_old += c in " -"
          seen_new += c in " +"
        else: raise PatchError(f"{path.name}: malformed line in hunk '{hunk.header}': {hl.rstrip()!r}")
        j += 1
      if seen_old != old_len or seen_new != new_len: raise PatchError(f"{path.name}: hunk '{hunk.header}' is truncated")
      files[-1].hunks.append(hunk)
      continue
    j += 1
  if not files: raise PatchError(f"{path.name}: contains no diff")
  return Patch(path, headers.get("From", ""), headers.get("Date", ""), subject, body, "".join(lines[diff_start:]), files)

def _apply_hunks(name: str, rel: str, src: list[str], hunks: list[Hunk]) -> list[str]:
  out, pos, drift = [], 0, 0  # drift: where the previous hunk really applied minus where it said it would
  for n, h in enumerate(hunks, 1):
    old = h.old()
    declared = h.old_start - 1 if old else h.old_start  # an insertion-only hunk (-K,0) inserts after line K
    want = declared + drift
    # exact match, nearest to where the hunk says it is, never overlapping the previous hunk
    candidates = [k for k in range(pos, len(src) - len(old) + 1) if src[k:k + len(old)] == old]
    if not candidates: raise PatchError(f"{name}: hunk #{n} ({h.header}) does not apply to {rel}")
    at = min(candidates, key=lambda k: abs(k - want))
    out += src[pos:at] + h.new()
    drift, pos = at - declared, at + len(old)
  return out + src[pos:]

def apply_patch(patch: Patch, root: Path) -> None:
  name = patch.path.name
  for fp in patch.files:
    if fp.old_path is None:  # new file
      target = root / fp.new_path
      if target.exists(): raise PatchError(f"{name}: creates {fp.new_path}, which already exists")
      target.parent.mkdir(parents=True, exist_ok=True)
      target.write_text("".join(_apply_hunks(name, fp.new_path, [], fp.hunks)))
      continue
    target = root / fp.old_path
    if not target.is_file(): raise PatchError(f"{name}: patches {fp.old_path}, which does not exist")
    new = _apply_hunks(name, fp.old_path, target.read_text().splitlines(keepends=True), fp.hunks)
    if fp.new_path is None:
      if new: raise PatchError(f"{name}: deletes {fp.old_path}, but its content differs from the patch")
      target.unlink()
    else:
      (root / fp.new_path).write_text("".join(new))
      if fp.new_path != fp.old_path: target.unlink()

# ---------------------------------------------------------------- materialize

def materialize(dest: Path, upto: int | None = None, wheel: Path | None = None, patch_dir: Path = PATCHES) -> int:
  """Build dest/tinygrad = pristine wheel + the first `upto` patches, atomically. Returns the number of patches applied."""
  series = read_series(patch_dir)
  if upto is not None and not 0 <= upto <= len(series): raise PatchError(f"--upto {upto}: the series has {len(series)} patches")
  chosen = series[:upto]
  patches = [parse_patch(p) for p in chosen]
  wheel = fetch_wheel(wheel)
  dest.mkdir(parents=True, exist_ok=True)
  scratch = Path(tempfile.mkdtemp(prefix=".build-", dir=dest))
  try:
    extract_pristine(wheel, scratch)
    for p in patches: apply_patch(p, scratch)
    target, old = dest / "tinygrad", dest / f"{scratch.name}-old"
    if target.exists(): os.replace(target, old)
    os.replace(scratch / "tinygrad", target)
  finally:
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.rmtree(dest / f"{scratch.name}-old", ignore_errors=True)
  return len(patches)

def compile_tree(tree: Path = TREE) -> None:
  """Write the tree's bytecode where it is missing or stale (a check of a compiled tree: ~0.05 s). Python reads .pyc files
  even where the environment stops it writing them (PYTHONDONTWRITEBYTECODE, common in containers), and without them every
  process compiles tinygrad's sources again, its generated driver bindings included: about a second of every start."""
  compileall.compile_dir(str(tree), quiet=2)

def apply(upto: int | None, wheel: Path | None, force: bool = False) -> str:
  total = len(read_series())
  n = total if upto is None else upto
  key = series_key(n)
  stamp = read_stamp()
  if not force and TREE.is_dir() and stamp.get("key") == key and stamp.get("upto") == n:
    if stamp.get("tree") == tree_hash(TREE):
      compile_tree()
      return f"upstream/tinygrad is up to date (tinygrad {read_pin()['version']} + {n}/{total} patches, series {key})"
    print("upstream/tinygrad was edited by hand; rebuilding it from the pristine wheel", file=sys.stderr)
  STAMP.unlink(missing_ok=True)
  materialize(UPSTREAM, n, wheel)
  compile_tree()
  STAMP.write_text(json.dumps({"key": key, "upto": n, "total": total, "tree": tree_hash(TREE)}) + "\n")
  return f"materialized upstream/tinygrad: tinygrad {read_pin()['version']} + {n}/{total} patches (series {key})"

def check(wheel: Path | None) -> str:
  with tempfile.TemporaryDirectory() as d: n = materialize(Path(d), None, wheel)
  return f"all {n} patches apply cleanly to tinygrad {read_pin()['version']}"

def list_series() -> str:
  series = read_series()
  return "\n".join(f"{i:3d}  {p.name:<60s} {parse_patch(p).subject}" for i, p in enumerate(series, 1)) or "(the series is empty)"

def _applies(patches: list[Patch], base: Path) -> bool:
  """Do these patches apply, in order, to a copy of the files they touch under base (a tree holding tinygrad/)?"""
  with tempfile.TemporaryDirectory() as d:
    for fp in (f for p in patches for f in p.files):
      if fp.old_path is not None and (base / fp.old_path).is_file() and not (Path(d) / fp.old_path).exists():
        (Path(d) / fp.old_path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(base / fp.old_path, Path(d) / fp.old_path)
    try:
      for p in patches: apply_patch(p, Path(d))
    except PatchError: return False
  return True

def _reversed(p: Patch) -> Patch:
  """p undone: its hunks with old and new swapped (applies where p's change is already in)."""
  flip = {"+": "-", "-": "+", " ": " "}
  files = [FilePatch(f.new_path, f.old_path, [Hunk(h.header, h.old_start, [(flip[c], t) for c, t in h.lines]) for h in f.hunks]) for f in p.files]
  return replace(p, files=files)

def needs(n: int, pristine: Path, patch_dir: Path = PATCHES) -> list[int]:
  """The earlier patches (1-based) that patch n needs to apply to the pristine tree: of those touching its files (with the
  ones those need in turn), the fewest (dropping each one whose absence still lets the rest apply, the latest first: a
  later patch may need an earlier one that n itself does not), in series order."""
  series = [parse_patch(p) for p in read_series(patch_dir)]
  files = lambda p: {f.old_path or f.new_path for f in p.files}
  declared = {d for i in declared_needs(series[n - 1]) if 0 < i < n for d in [i, *needs(i, pristine, patch_dir)]}
  deps = [i for i in range(1, n) if files(series[i - 1]) & files(series[n - 1]) or i in declared]
  deps = sorted({*deps, *(d for i in deps for d in needs(i, pristine, patch_dir))})   # what those need to apply in turn
  if not _applies([series[i - 1] for i in deps + [n]], pristine):
    raise PatchError(f"patch {n} does not apply to pristine tinygrad after the patches before it")
  for i in reversed(list(deps)):
    if i not in declared and _applies([series[j - 1] for j in deps if j != i] + [series[n - 1]], pristine): deps.remove(i)
  return deps

def declared_needs(p: Patch) -> set[int]:
  """The patches a patch's header says it needs to have its effect, beyond what its diff's context needs: the 4-digit
  numbers of its 'Needs:' paragraph."""
  m = re.search(r"^Needs:(.*?)(?:\n\s*\n|\Z)", p.body, re.S | re.M)
  return {int(x) for x in re.findall(r"\b(\d{4})\b", m.group(1))} if m else set()

def _mail(p: Patch, diff: str, i: int, total: int) -> str:
  subject = f"[PATCH {i}/{total}] {p.subject}" if total > 1 else f"[PATCH] {p.subject}"
  return (f"From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
          f"From: {p.author or 'tinygrad-mla <tinygrad-mla@users.noreply.invalid>'}\n"
          f"Date: {p.date or 'Sun, 22 Nov 2026 00:00:00 +0000'}\nSubject: {subject}\n\n{p.body}\n---\n{diff}")

def _rediff(patches: list[Patch], base: Path) -> list[str]:
  """The diffs of patches applied in order onto base, against base's lines (a rebase: hunk positions and context as there)."""
  import difflib
  out = []
  with tempfile.TemporaryDirectory() as d:
    root = Path(d)
    for p in patches:
      for fp in p.files:
        for rel in (fp.old_path, fp.new_path):
          if rel is not None and (base / rel).is_file() and not (root / rel).exists():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(base / rel, root / rel)
    for p in patches:
      before = {f.old_path: (root / f.old_path).read_text() for f in p.files if f.old_path is not None}
      apply_patch(p, root)
      diff = ""
      for fp in p.files:
        a = before.get(fp.old_path, "").splitlines(keepends=True)
        b = (root / fp.new_path).read_text().splitlines(keepends=True) if fp.new_path is not None else []
        diff += f"diff --git a/{fp.old_path or fp.new_path} b/{fp.new_path or fp.old_path}\n"
        diff += "".join(difflib.unified_diff(a, b, f"a/{fp.old_path}" if fp.old_path else "/dev/null",
                                             f"b/{fp.new_path}" if fp.new_path else "/dev/null"))
      out.append(diff + "-- \n")
  return out

def export(n: int, out_dir: Path, wheel: Path | None = None, onto: Path | None = None) -> list[Path]:
  """Patch n (1-based) as git-am-able mails, with the earlier patches it needs first (paths are relative to a tinygrad
  checkout: a/tinygrad/...). With `onto` (a tinygrad checkout, e.g. master), rebased onto that tree: each mail's diff is
  made against its files, and a patch whose change the tree has already is left out and said so (PatchError where one
  does not apply)."""
  series = read_series()
  if not 1 <= n <= len(series): raise PatchError(f"--export {n}: the series has {len(series)} patches")
  with tempfile.TemporaryDirectory() as d:
    extract_pristine(fetch_wheel(wheel), Path(d))
    chain = needs(n, Path(d)) + [n]
  patches = [parse_patch(series[i - 1]) for i in chain]
  diffs = [p.diff for p in patches]
  notes = []
  if onto is not None:
    if not (onto / "tinygrad").is_dir(): raise PatchError(f"--onto {onto}: not a tinygrad checkout (no tinygrad/ in it)")
    todo = []
    for i, p in zip(chain, patches):
      if _applies(todo + [_reversed(p)], onto) and not _applies(todo + [p], onto): notes.append(f"patch {i}: already in {onto}")
      elif _applies(todo + [p], onto): todo.append(p)
      else: raise PatchError(f"patch {i} ({p.path.name}) does not apply to {onto}: rebase it by hand")
    patches, diffs = todo, _rediff(todo, onto)
  out_dir.mkdir(parents=True, exist_ok=True)
  outs = []
  for k, (p, diff) in enumerate(zip(patches, diffs), 1):
    out = out_dir / (f"{k:04d}-" + p.path.name.split("-", 1)[1] if len(patches) > 1 else p.path.name)
    out.write_text(_mail(p, diff, k, len(patches)))
    outs.append(out)
  for note in notes: print(note, file=sys.stderr)
  return outs

def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--wheel", type=Path, help="local copy of the pinned wheel (no download)")
  g = ap.add_mutually_exclusive_group()
  g.add_argument("--upto", type=int, metavar="N", help="apply only the first N patches")
  g.add_argument("--check", action="store_true", help="check that every patch applies; write nothing")
  g.add_argument("--list", action="store_true", help="list the series")
  g.add_argument("--export", nargs=2, metavar=("N", "DIR"), help="write patch N (and the earlier patches it needs) as git-am-able mails into DIR")
  ap.add_argument("--onto", type=Path, metavar="CHECKOUT", help="with --export: rebase the mails onto this tinygrad checkout (e.g. master)")
  ap.add_argument("--force", action="store_true", help="rebuild even if the tree is up to date")
  args = ap.parse_args(argv)
  try:
    if args.list: print(list_series())
    elif args.check: print(check(args.wheel))
    elif args.export:
      if not args.export[0].isdigit(): raise PatchError(f"--export takes a patch number, not '{args.export[0]}'")
      print("\n".join(map(str, export(int(args.export[0]), Path(args.export[1]), args.wheel, args.onto))))
    else: print(apply(args.upto, args.wheel, args.force))
  except PatchError as e:
    print(f"apply_patches: error: {e}", file=sys.stderr)
    return 1
  return 0

if __name__ == "__main__": sys.exit(main())
