"""apply_patches.py on a scratch copy of the repo: list, check, upto, export, idempotence, and its errors."""
import shutil, subprocess, sys
from pathlib import Path
import pytest
import apply_patches as ap
import patchset

def run(repo: Path, *args: str) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, str(repo / "apply_patches.py"), *args], capture_output=True, text=True, timeout=300, cwd=repo)

@pytest.fixture
def repo(tmp_path: Path) -> Path:
  """A copy of the parts apply_patches.py reads, with the pinned wheel already cached (no network)."""
  r = tmp_path / "repo"
  (r / "upstream" / ".cache").mkdir(parents=True)
  for f in ("apply_patches.py", "patchset.py"): shutil.copy(patchset.ROOT / f, r)
  shutil.copy(ap.UPSTREAM / "PIN", r / "upstream")
  shutil.copytree(ap.PATCHES, r / "patches")
  wheel = ap.fetch_wheel()
  shutil.copy(wheel, r / "upstream" / ".cache" / wheel.name)
  return r

def n_patches() -> int: return len(ap.read_series())

def one_error(r: subprocess.CompletedProcess) -> str:
  """A failure is exit 1 with exactly one 'apply_patches: error:' line (progress lines may precede it)."""
  assert r.returncode == 1, r.stdout + r.stderr
  errs = [l for l in r.stderr.splitlines() if l.startswith("apply_patches: error:")]
  assert len(errs) == 1 and "Traceback" not in r.stderr, r.stderr
  return errs[0]

def test_apply_then_rerun_is_a_noop(repo):
  first = run(repo, "--wheel", str(repo / "upstream" / ".cache" / ap.read_pin()["wheel"]))
  assert first.returncode == 0, first.stderr
  assert "materialized" in first.stdout
  model = repo / "upstream" / "tinygrad" / "llm" / "model.py"
  mtime = model.stat().st_mtime_ns
  again = run(repo)
  assert again.returncode == 0 and "up to date" in again.stdout
  assert model.stat().st_mtime_ns == mtime, "a no-op re-run rewrote the tree"

def test_tree_bytecode_written(repo):
  """The tree's bytecode is written with the tree, and again where it went missing, even where the environment stops
  Python writing any (PYTHONDONTWRITEBYTECODE): each later process then reads it instead of compiling tinygrad again."""
  import importlib.util, os
  env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
  run_env = lambda: subprocess.run([sys.executable, str(repo / "apply_patches.py")], capture_output=True, text=True, timeout=300, cwd=repo, env=env)
  assert run_env().returncode == 0
  tree = repo / "upstream" / "tinygrad"
  sources = list(tree.rglob("*.py"))
  missing = lambda: [f for f in sources if not Path(importlib.util.cache_from_source(str(f))).exists()]
  assert len(sources) > 100 and not missing()
  shutil.rmtree(tree / "runtime" / "autogen" / "__pycache__")
  r = run_env()
  assert r.returncode == 0 and "up to date" in r.stdout and not missing()
  # a process under that environment imports tinygrad without compiling a source file (tinygrad compiles its patterns itself)
  code = "import sys, builtins; calls = []; c = builtins.compile; builtins.compile = lambda *a, **k: calls.append(str(a[1])) or c(*a, **k); " \
         "import tinygrad.runtime.ops_cpu; print(sum(f.endswith('.py') for f in calls))"
  p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=repo / "upstream", env=env)
  assert p.returncode == 0 and p.stdout.split()[-1] == "0", p.stdout + p.stderr

def test_hand_edit_is_rebuilt(repo):
  assert run(repo).returncode == 0
  model = repo / "upstream" / "tinygrad" / "llm" / "model.py"
  pristine = model.read_text()
  model.write_text(pristine + "\n# edited by hand\n")
  r = run(repo)
  assert r.returncode == 0 and "edited by hand" in r.stderr
  assert model.read_text() == pristine

def test_changed_patch_rebuilds_from_pristine(repo):
  assert run(repo).returncode == 0
  p = sorted((repo / "patches").glob("0001-*.patch"))[0]
  p.write_text(p.read_text().replace("Why:", "Why (reworded):", 1))
  r = run(repo)
  assert r.returncode == 0 and "materialized" in r.stdout

def test_list(repo):
  r = run(repo, "--list")
  assert r.returncode == 0
  lines = r.stdout.strip().splitlines()
  assert len(lines) == n_patches()
  assert lines[0].split()[0] == "1" and "0001-" in lines[0] and "llm:" in lines[0]

def test_check_writes_nothing(repo):
  r = run(repo, "--check")
  assert r.returncode == 0 and f"all {n_patches()} patches apply" in r.stdout
  assert not (repo / "upstream" / "tinygrad").exists()

def test_upto_zero_is_pristine_wheel(repo):
  r = run(repo, "--upto", "0")
  assert r.returncode == 0, r.stderr
  assert "0/" in r.stdout
  assert "from tinygrad.llm.kernels.amd import" in (repo / "upstream" / "tinygrad" / "llm" / "model.py").read_text().splitlines()[4]
  r = run(repo, "--upto", str(n_patches() + 1))
  assert "--upto" in one_error(r)

def test_broken_patch_names_hunk_and_leaves_tree(repo):
  assert run(repo).returncode == 0
  tree_before = ap.tree_hash(repo / "upstream" / "tinygrad")
  bad = repo / "patches" / "9999-broken.patch"
  bad.write_text("From: x <x@y>\nSubject: [PATCH] broken\n\nWhy: test\n---\n--- a/tinygrad/llm/model.py\n+++ b/tinygrad/llm/model.py\n"
                 "@@ -1,2 +1,2 @@\n this line is not in the file\n-nor this one\n+replacement\n")
  with open(repo / "patches" / "series", "a") as f: f.write("9999-broken.patch\n")
  err = one_error(run(repo))
  assert "9999-broken.patch" in err and "hunk #1" in err and "tinygrad/llm/model.py" in err
  assert ap.tree_hash(repo / "upstream" / "tinygrad") == tree_before, "a failing patch changed the tree"
  assert not list((repo / "upstream").glob(".build-*")), "scratch folders left behind"
  assert "9999-broken.patch" in one_error(run(repo, "--check"))

@pytest.mark.parametrize("damage, message", [
  (lambda r: (r / "patches" / "series").write_text((r / "patches" / "series").read_text() + "0099-missing.patch\n"), "not a file"),
  (lambda r: (r / "patches" / "0050-unlisted.patch").write_text("x"), "no series entry"),
  (lambda r: (r / "patches" / "series").unlink(), "series is missing"),
])
def test_series_errors(repo, damage, message):
  damage(repo)
  assert message in one_error(run(repo))

def test_hash_mismatch(repo):
  wheel = repo / "upstream" / ".cache" / ap.read_pin()["wheel"]
  data = bytearray(wheel.read_bytes()); data[100] ^= 0xFF; wheel.write_bytes(bytes(data))
  assert "sha256 mismatch" in one_error(run(repo))

def test_no_network(repo):
  shutil.rmtree(repo / "upstream" / ".cache")
  pin = repo / "upstream" / "PIN"
  pin.write_text(pin.read_text().replace("url = https://", "url = http://127.0.0.1:9/"))
  err = one_error(run(repo))
  assert "cannot download" in err and "--wheel" in err

def test_export_is_git_am_able(repo, tmp_path):
  out = tmp_path / "export"
  r = run(repo, "--export", "1", str(out))
  assert r.returncode == 0, r.stderr
  mail = Path(r.stdout.strip())
  text = mail.read_text()
  assert text.startswith("From ") and "\nSubject: [PATCH] " in text and "\nWhy:" in text and "\nUpstream:" in text
  # a tinygrad checkout (here: the pristine wheel tree under git) takes it with git am
  co = tmp_path / "checkout"
  ap.extract_pristine(repo / "upstream" / ".cache" / ap.read_pin()["wheel"], co)
  git = lambda *a: subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *a], cwd=co, capture_output=True, text=True)
  assert git("init", "-q").returncode == 0 and git("add", "-A").returncode == 0 and git("commit", "-qm", "pristine").returncode == 0
  am = git("am", str(mail))
  assert am.returncode == 0, am.stderr
  assert "llm:" in git("log", "-1", "--format=%s").stdout
  assert "the series has" in one_error(run(repo, "--export", "99", str(out)))

def _git_checkout(tree: Path):
  """tree (holding tinygrad/) as a git repository with one commit; returns a git runner for it."""
  git = lambda *a: subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *a], cwd=tree, capture_output=True, text=True)
  assert git("init", "-q").returncode == 0 and git("add", "-A").returncode == 0 and git("commit", "-qm", "base").returncode == 0
  return git

def test_export_brings_the_patches_it_needs(repo, tmp_path):
  """Patch 4 (the CUDA graph's programmatic launch) edits lines patch 2 wrote: its export is patch 2 then patch 4, numbered
  1/2 and 2/2, and git am takes both onto the pristine tree; patch 3 needs nothing before it."""
  r = run(repo, "--export", "4", str(tmp_path / "e4"))
  assert r.returncode == 0, r.stderr
  mails = [Path(l) for l in r.stdout.split()]
  assert [m.name[:4] for m in mails] == ["0001", "0002"] and "graph-cuda-build-kernel-nodes" in mails[0].name
  assert "Subject: [PATCH 1/2]" in mails[0].read_text() and "Subject: [PATCH 2/2]" in mails[1].read_text()
  co = tmp_path / "pristine"
  ap.extract_pristine(repo / "upstream" / ".cache" / ap.read_pin()["wheel"], co)
  git = _git_checkout(co)
  am = git("am", *map(str, mails))
  assert am.returncode == 0, am.stderr
  assert len(run(repo, "--export", "3", str(tmp_path / "e3")).stdout.split()) == 1

def test_export_brings_the_patches_its_header_needs(repo):
  """A 'Needs:' paragraph names patches the diff's context does not need but its effect does: patch 11 (an upcast after a
  PADTO of a symbolic dim) exports with patch 9 (that PADTO) and 9's own needs; patches without one export as before."""
  series = [ap.parse_patch(p) for p in ap.read_series(repo / "patches")]
  assert ap.declared_needs(series[10]) == {9} and not any(ap.declared_needs(p) for p in series[:10])
  pristine = repo / "pristine"
  ap.extract_pristine(repo / "upstream" / ".cache" / ap.read_pin()["wheel"], pristine)
  assert ap.needs(11, pristine, repo / "patches") == [7, 9, 10] and ap.needs(9, pristine, repo / "patches") == []

def test_export_past_a_patch_that_needs_others(repo):
  """Patch 72 shares its file with patch 30, which applies only after earlier patches of another file: the patches that
  share 72's file are taken with what they need in turn, and 72, which applies to the pristine tree by itself, needs none."""
  pristine = repo / "pristine"
  ap.extract_pristine(repo / "upstream" / ".cache" / ap.read_pin()["wheel"], pristine)
  assert ap.needs(30, pristine, repo / "patches") and ap.needs(72, pristine, repo / "patches") == []

def test_export_onto_another_checkout(repo, tmp_path):
  """--onto: a checkout that has patch 2 already, and its graph file shifted by 3 lines: patch 2 is left out (said so),
  patch 4's mail is made against that checkout's lines and git am takes it there; a checkout without tinygrad/ is refused."""
  co = tmp_path / "master"
  ap.extract_pristine(repo / "upstream" / ".cache" / ap.read_pin()["wheel"], co)
  ap.apply_patch(ap.parse_patch(ap.read_series(repo / "patches")[1]), co)
  graph = co / "tinygrad" / "runtime" / "graph" / "cuda.py"
  graph.write_text("# a\n# b\n# c\n" + graph.read_text())
  git = _git_checkout(co)
  r = run(repo, "--export", "4", str(tmp_path / "e"), "--onto", str(co))
  assert r.returncode == 0, r.stderr
  mails = [Path(l) for l in r.stdout.split()]
  assert len(mails) == 1 and "programmatic-dependent-launch" in mails[0].name and "patch 2: already in" in r.stderr
  am = git("am", str(mails[0]))
  assert am.returncode == 0, am.stderr
  assert "--onto" in one_error(run(repo, "--export", "4", str(tmp_path / "x"), "--onto", str(tmp_path)))
