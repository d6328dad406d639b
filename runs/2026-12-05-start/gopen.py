"""GGUFFile's open (header, metadata with the vocabulary's string arrays, tensor infos), best of 7 a file:
`PYTHONPATH=. python3 runs/2026-12-05-start/gopen.py [FILE.gguf ...]` from the repository root."""
import sys, time
sys.path.insert(0,'.')
from apps.gguf import GGUFFile
for p in sys.argv[1:] or (".cache/models/youtu-llm-2b-release-seed0-g1-9ff6c3017b.gguf", ".cache/models/glm-4.7-flash-tiny-release-seed0-g1-38110b630f.gguf"):
  best=9
  for i in range(7):
    t=time.perf_counter(); gf=GGUFFile(p); best=min(best,time.perf_counter()-t); gf.close()
  print(p.split('/')[-1][:20], round(best,4))
