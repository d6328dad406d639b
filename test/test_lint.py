"""ruff over the project's code with pyproject.toml's rules (pyflakes, whitespace, syntax, 150 columns): CI lints through
the test command."""
import ast, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

def test_ruff_passes():
  r = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", str(ROOT)], cwd=ROOT, capture_output=True, text=True, timeout=300)
  assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]

def imports_of_apps() -> dict[str, set[str]]:
  """apps' modules -> the apps modules each imports (anywhere in it, lazy imports included)."""
  mods: dict[str, set[str]] = {}
  for p in (ROOT / "apps").rglob("*.py"):
    deps: set[str] = set()
    for n in ast.walk(ast.parse(p.read_text())):
      if isinstance(n, ast.ImportFrom) and n.module: deps |= {n.module} | {f"{n.module}.{a.name}" for a in n.names}
      elif isinstance(n, ast.Import): deps |= {a.name for a in n.names}
    mods[".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")] = deps
  return {m: {d for d in deps if d in mods and d != m} | {d for d in deps if d.split(".")[0] in ("apply_patches", "bench_block", "search2", "tools")}
          for m, deps in mods.items()}

def test_import_graph():
  """Dependencies point one way: no import cycle among apps' modules, the kernels import nothing of the model layers, and
  nothing in apps imports a top-level script (apply_patches, bench_block, search2, tools); the tree identity they share is patchset."""
  graph = imports_of_apps()
  assert not [m for m, deps in graph.items() for d in deps if d.split(".")[0] in ("apply_patches", "bench_block", "search2", "tools")]
  kernels = {m: {d for d in deps if d.startswith("apps.") and not d.startswith("apps.kernels") and d != "apps.gguf"}
             for m, deps in graph.items() if m.startswith("apps.kernels")}
  assert not any(kernels.values()), kernels
  def cycle(m: str, path: tuple[str, ...]) -> tuple[str, ...] | None:
    if m in path: return path[path.index(m):] + (m,)
    return next((c for d in graph.get(m, ()) if (c := cycle(d, path + (m,)))), None)
  assert not (found := next((c for m in graph if (c := cycle(m, ()))), None)), found

def test_tools_run_as_modules():
  """tools/ is a package whose modules run as `python3 -m tools.<name>` from the repo root: none of them edits sys.path
  (the repo root is already its first entry) or imports a test module."""
  assert (ROOT / "tools" / "__init__.py").is_file()
  is_test = lambda name: name.split(".")[0] in ("test", "conftest") or name.split(".")[0].startswith("test_")
  for p in sorted((ROOT / "tools").glob("*.py")):
    for n in ast.walk(ast.parse(p.read_text())):
      assert not (isinstance(n, ast.Attribute) and n.attr == "path" and isinstance(n.value, ast.Name) and n.value.id == "sys"), \
        f"{p.name}:{n.lineno}: sys.path"
      names = [n.module or ""] if isinstance(n, ast.ImportFrom) else [a.name for a in n.names] if isinstance(n, ast.Import) else []
      assert not any(is_test(m) for m in names), f"{p.name}:{n.lineno}: imports a test module"

def test_tools_do_not_patch_apps():
  """A tool sets what the model runs through the switches the model takes (kernels=, fusions=, kernel_modules= and their
  setters): no tool assigns to an attribute (or an item of one) of anything it imported from apps, a module, class or
  function, or calls setattr on one."""
  def patches(tree: ast.AST) -> list[int]:
    names = set()
    for n in ast.walk(tree):
      if isinstance(n, ast.Import): names |= {(a.asname or a.name).split(".")[0] for a in n.names if a.name.split(".")[0] == "apps"}
      elif isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "apps": names |= {a.asname or a.name for a in n.names}
    def base(t: ast.AST) -> str | None:
      while isinstance(t, (ast.Attribute, ast.Subscript)): t = t.value
      return t.id if isinstance(t, ast.Name) else None
    lines = []
    for n in ast.walk(tree):
      targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, (ast.AugAssign, ast.AnnAssign)) else []
      lines += [n.lineno for t in targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])
                if isinstance(e, (ast.Attribute, ast.Subscript)) and base(e) in names]
      if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "setattr" and n.args and base(n.args[0]) in names:
        lines.append(n.lineno)
    return lines
  found = {p.name: lines for p in sorted((ROOT / "tools").glob("*.py")) if (lines := patches(ast.parse(p.read_text())))}
  assert not found, found
