"""ruff over the project's code with pyproject.toml's rules (pyflakes, whitespace, syntax, 150 columns): CI lints through
the test command."""
import subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

def test_ruff_passes():
  r = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", str(ROOT)], cwd=ROOT, capture_output=True, text=True, timeout=300)
  assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
