# The scheduler's turns (ms) while a 1,406-token prompt starts beside a running stream, CPU, tiny GLM-4.7-Flash, 4 slots
# (run with B.diff applied for B); turns_A.log / the journal entry have the numbers.
import time, apps
from apps.batching import Request, Scheduler
from apps.engine import Engine, resolve_model
from apps.sampling import Params
eng = Engine.load(resolve_model("glm-4.7-flash-tiny", None, None), 4096, quiet=True, slots=4)
sched = Scheduler(eng)
sched.warmup([Params()])
def go(salt):
  s = Request(eng.chat_ids([{"role": "user", "content": f"Tell me {salt}"}]), 60)
  sched.submit(s)
  while not sched.running: sched.turn()
  for _ in range(3): sched.turn()
  long = Request(eng.chat_ids([{"role": "user", "content": salt + " " + " ".join(["expert router latent cache"] * 350)}]), 2)
  sched.submit(long)
  times = []
  while long.events.empty() or long.events.queue[-1][0] == "text":
    t = time.perf_counter(); sched.turn(); times.append(round((time.perf_counter() - t) * 1e3))
  print(salt, len(long.ids), times)
  while sched.running: sched.turn()
go("first")
go("second")

