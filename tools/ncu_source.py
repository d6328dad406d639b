"""Where inside one kernel the time goes: Nsight Compute's per-instruction warp stall samples of a report, the hottest SASS
instructions with their largest stall reasons, and the samples summed by instruction kind (LDG, HMMA, BAR, SHFL, ...).

  ncu --set full --import-source yes --clock-control none --cache-control none -k regex:NAME -s 2 -c 1 -o rep PROGRAM...
  ncu -i rep.ncu-rep --page source --csv --print-source sass > rep.csv
  python3 -m tools.ncu_source rep.csv [--top 40]
"""
from __future__ import annotations
import argparse, csv, re
from collections import defaultdict

def _num(x: str) -> float:
  try: return float(x.replace(",", ""))
  except ValueError: return 0.0

def main(argv=None) -> None:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("csv")
  ap.add_argument("--top", type=int, default=40)
  a = ap.parse_args(argv)
  lines = open(a.csv, errors="replace").read().splitlines()
  start = next((i for i, l in enumerate(lines) if "Source" in l and ("Sampling" in l or "Address" in l)), 0)
  rows = list(csv.DictReader(lines[start:]))
  if not rows: raise SystemExit(f"ncu_source: no rows in {a.csv}")
  cols = list(rows[0].keys())
  samp = next((c for c in cols if "Sampling (All" in c), None) or next((c for c in cols if "Sampling" in c), None)
  if samp is None: raise SystemExit(f"ncu_source: {a.csv} has no warp stall sampling column (ncu --set full --import-source yes)")
  stalls = [c for c in cols if c != samp and re.search(r"stall", c, re.I) and "Sampling" not in c]
  src = next((c for c in cols if c.strip() == "Source"), cols[1])
  total = sum(_num(r[samp]) for r in rows) or 1.0
  print(f"{len(rows)} instructions, {total:.0f} samples ({samp}); stall columns: {len(stalls)}")
  kinds = defaultdict(float)
  for r in rows:
    op = r[src].strip().lstrip("@!P0123456789UPT ").split(" ")[0].split(".")[0]
    kinds[op] += _num(r[samp])
  print("by kind: " + ", ".join(f"{k} {v / total:.1%}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])[:14]))
  for i, r in sorted(enumerate(rows), key=lambda ir: -_num(ir[1][samp]))[:a.top]:
    why = ", ".join(f"{c[:28]} {v:.0f}" for v, c in sorted(((_num(r[c]), c) for c in stalls), reverse=True)[:3] if v)
    print(f"{i:5d} {_num(r[samp]) / total:6.1%}  {r[src].strip()[:70]:70s}  {why}")

if __name__ == "__main__": main()
