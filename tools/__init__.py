"""The measurement tools: benchmarks, profiles, A/Bs, path checks, the independent references and the goldens made from them.

Each runs from the repo root as a module, `python3 -m tools.<name> [--help]`: the repo root is then the first entry of
sys.path, so `apps`, `bench_block` and the other tools import by their package names (and `tools.profile` cannot shadow
the standard library's `profile`). Nothing in apps/ imports from here.
"""
