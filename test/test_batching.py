"""Batched decode (Transformer.start / step / launch / collect): several sequences in slots of one cache, one step for
all of them. Each sequence's tokens are the ones it gets alone (generate()), and transformers' greedy continuation of the
goldens' prompt, whatever else runs beside it; the steps fail with one-line errors where they are misused."""
import pytest
from apps import synth
from apps.model import Transformer, ContextOverflow
from apps.sampling import Params
from tools.make_model_goldens import N_GREEDY, load_golden

CASES = [("glm-4.7-flash-tiny", "release"), ("deepseek-v2-lite-tiny", "release")]   # low-rank query / direct attn_q
OTHERS = ([3, 4, 8, 1, 2, 6, 7], [9] * 20, [5, 17])   # prompts of other lengths beside the goldens' one
SAMPLED = Params(temperature=0.9, seed=7)

@pytest.fixture(scope="module", params=CASES, ids=["/".join(c) for c in CASES])
def case(request):
  preset, mix = request.param
  _, gold = load_golden(preset, mix)
  model = Transformer.from_gguf(synth.generate(preset, mix, progress=False), max_context=96, prefill_chunks=(16,), slots=4, capture_dir=None)
  return model, gold

def run(model: Transformer, jobs: list[tuple[int, list[int], Params]], n: int) -> dict[int, list[int]]:
  """Start the jobs' slots one after another with steps of the running ones between (as the server interleaves them), the
  steps pipelined (each launched before the one before it is collected); at least n tokens of each (all of them)."""
  out: dict[int, list[int]] = {}
  running, prev = [], None
  def collect(step, slots):
    for s, t in zip(slots, model.collect(step)): out[s].append(t)
  for slot, ids, params in jobs:
    if prev is not None: collect(*prev)   # a slot's steps are collected before another slot starts
    prev = None
    *_, first = model.start(slot, ids, params)
    out[slot] = [first]
    if running:
      prev = (model.launch(running), list(running))
    running.append(slot)
  while min(len(v) for v in out.values()) < n:
    step = (model.launch(running), list(running))
    if prev is not None: collect(*prev)
    prev = step
  collect(*prev)
  return out

def test_batched_rows_are_their_sequences_alone(case):
  """Four sequences of different lengths, greedy and seeded sampling mixed, batches of 1 to 4 rows (3: a padded step of
  4): the goldens' prompt continues as transformers' greedy reference, the others as generate() alone. DeepSeek-V2-Lite's
  27 blocks (its direct attn_q) take two greedy rows: each capture of them costs the CPU seconds."""
  model, gold = case
  prompt, want = gold["greedy/prompt"].tolist(), gold["greedy/hf"].tolist()
  others = list(zip((0, 3, 1), OTHERS, (Params(), SAMPLED, Params())))[:1 if model.cfg.n_layer > 8 else 3]
  alone = [list(model.generate(ids, N_GREEDY, p)) for _, ids, p in others]
  got = run(model, [(2, prompt, Params())] + others, N_GREEDY)
  assert got[2][:N_GREEDY] == want
  assert [got[slot][:N_GREEDY] for slot, _, _ in others] == alone
  # a slot's cached tokens are its sequence: the next turn of it reuses them and continues as a fresh start would
  assert model.slot_cached[2] == prompt + got[2][:-1]
  turn = prompt + got[2] + [7, 7]
  *_, t = model.start(2, turn)
  fresh = list(model.generate(turn, 1))
  assert t == fresh[0] and model.slot_cached[2] == turn

def run_mixed(model: Transformer, jobs: list[tuple[int, list[int], Params]], n: int) -> dict[int, list[int]]:
  """The first job starts alone; each later one's prompt goes chunk by chunk as rows of the running slots' steps (a mixed
  step: launch(..., prompt)), its first token with the step of its last chunk, after which it is a row of the next step at
  once; the steps pipelined. At least n tokens of each."""
  slot, ids, params = jobs[0]
  *_, first = model.start(slot, ids, params)
  out, running, prev, prompt, waiting = {slot: [first]}, [slot], None, None, list(jobs[1:])
  while waiting or prompt is not None or min(len(v) for v in out.values()) < n:
    if prompt is None and waiting:
      slot, ids, params = waiting.pop(0)
      prompt, out[slot] = model.begin(slot, ids, params), []
    step = model.launch(running, prompt)
    if step.first is not None: running, prompt = running + [step.first], None
    if prev is not None:
      for s, t in zip(prev.slots, model.collect(prev)): out[s].append(t)
    prev = step
  for s, t in zip(prev.slots, model.collect(prev)): out[s].append(t)
  return out

def test_mixed_steps_are_their_sequences_alone(case):
  """Prompts prefilled as rows of the other slots' decode steps (one of one chunk, one of two, one a chunk's length exactly)
  continue as they do alone: the goldens' prompt as transformers' greedy reference, the others as generate(); the slots'
  caches hold their sequences after."""
  model, gold = case
  for s in range(model.slots): model.reset(s)
  prompt, want = gold["greedy/prompt"].tolist(), gold["greedy/hf"].tolist()
  others = list(zip((0, 3, 1), OTHERS[1:] + ([6] * 16,), (Params(), SAMPLED, Params())))[:2 if model.cfg.n_layer > 8 else 3]
  alone = {slot: list(model.generate(ids, N_GREEDY, p)) for slot, ids, p in others}
  got = run_mixed(model, [others[0], (2, prompt, Params())] + others[1:], N_GREEDY)
  assert got[2][:N_GREEDY] == want
  assert {slot: got[slot][:N_GREEDY] for slot, _, _ in others} == alone
  for slot, ids, _ in others + [(2, prompt, None)]: assert model.slot_cached[slot] == ids + got[slot][:len(model.slot_cached[slot]) - len(ids)]

def test_mixed_steps_on_the_generated_path():
  """The same on tinygrad's generated kernels (the tensor-op attention: every row stored, then each attends by slices):
  the goldens' prompt as rows beside a running sequence, then a prompt of two chunks."""
  _, gold = load_golden("glm-4.7-flash-tiny", "release")
  model = Transformer.from_gguf(synth.generate("glm-4.7-flash-tiny", "release", progress=False), max_context=64, prefill_chunks=(16,),
                                slots=3, capture_dir=None, kernels="generated")
  prompt, want = gold["greedy/prompt"].tolist(), gold["greedy/hf"].tolist()
  others = [(0, OTHERS[0], Params()), (1, OTHERS[1], Params())]
  alone = {slot: list(model.generate(ids, N_GREEDY, p)) for slot, ids, p in others}
  got = run_mixed(model, [others[0], (2, prompt, Params()), others[1]], N_GREEDY)
  assert got[2][:N_GREEDY] == want
  assert {slot: got[slot][:N_GREEDY] for slot, _, _ in others} == alone

def test_misuse_is_a_clear_error(case):
  model, _ = case
  for s in range(model.slots): model.reset(s)
  with pytest.raises(ValueError, match="slot 1 has no token to continue"): model.step([1])
  *_, _ = model.start(0, [1, 2, 3])
  *_, _ = model.start(1, [4, 5])
  with pytest.raises(ValueError, match=r"slots \[0, 0\] of 4"): model.step([0, 0])
  with pytest.raises(ValueError, match=r"slots \[0, 4\] of 4"): model.step([0, 4])
  a = model.launch([0])
  b = model.launch([0, 1])
  with pytest.raises(ValueError, match="two launched steps"): model.launch([1])
  with pytest.raises(ValueError, match="slot 0 has launched steps"): next(model.start(0, [1, 2]))
  model.collect(a), model.collect(b)
  assert len(model.slot_cached[0]) == 3 + 2 and len(model.slot_cached[1]) == 2 + 1
  p = model.begin(2, [1, 2, 3])
  with pytest.raises(ValueError, match="the prompt of slot 2 is a row of the step"): model.launch([0, 2], p)
  model.collect(model.launch([0], p))   # its one chunk, its last
  with pytest.raises(ValueError, match="the prompt of slot 2 is prefilled already"): model.launch([0], p)
  *_, _ = model.start(3, [1] * 94)
  model.step([3]), model.step([3])    # positions 94 and 95: the last rows of the slot's context
  with pytest.raises(ContextOverflow, match="97 tokens do not fit"): model.step([3])
  with pytest.raises(ValueError, match="slots 65"): Transformer.from_gguf(synth.generate("glm-4.7-flash-tiny", "release", progress=False),
                                                                         max_context=32, slots=65)

def test_gpu_bench_times_a_prompt_beside_the_rows_both_ways():
  """`gpu_bench --batch --mixed`: a prompt of two chunks beside 1 and 2 decoding rows, as rows of their steps and alone
  between them: two turns each way, the same first token, the rows as their prompts alone."""
  from tools import gpu_bench
  rows = gpu_bench.at_batches("youtu-llm-2b-tiny", synth.generate("youtu-llm-2b-tiny", "release", progress=False), [1, 2], 4, mixed=40)
  for r in rows:
    assert r["mixed_turns"] == r["between_turns"] == 2 and r["mixed_first"] == r["between_first"], r
    assert r["agree"] == [gpu_bench.BATCH_CHECK] * r["batch"] and r["mixed_turn_ms"] > 0
  # --mixed-chunk 128: a prompt of 160 tokens in a chunk of 128 and its last of 32, each way
  (r,) = gpu_bench.at_batches("youtu-llm-2b-tiny", synth.generate("youtu-llm-2b-tiny", "release", progress=False), [1], 4, mixed=160,
                              mixed_chunk=128)
  assert r["mixed_turns"] == r["between_turns"] == 2 and r["mixed_first"] == r["between_first"], r
  # --mixed-chunk 8, a length the model lacks: added for the run; 24 tokens in three chunks of 8, each way
  (r8,) = gpu_bench.at_batches("youtu-llm-2b-tiny", synth.generate("youtu-llm-2b-tiny", "release", progress=False), [1], 4, mixed=24,
                               mixed_chunk=8)
  assert r8["mixed_turns"] == r8["between_turns"] == 3 and r8["mixed_first"] == r8["between_first"], r8

def test_path_check_compares_a_prompt_as_rows_and_alone():
  """`path_check --mixed` (run at full size on the GPU): a 40-token window as rows of another slot's steps and alone leaves
  the same latent rows, the same first token and the other slot's same tokens (the CPU's products: exactly)."""
  from tools import path_check
  (row,) = path_check.mixed(["youtu-llm-2b-tiny"], "release", 40, 7)
  assert row["latents"] == 0.0 and row["first"] and row["other"] == row["steps"] == 3, row
