"""The sampler's filters against a reference written here from llama.cpp's chain (top-k, then top-p and min-p on the softmax
of what top-k kept, temperature last): the radix select finds each row's threshold exactly, and the tokens a row draws are
the tokens the reference keeps, no more and no fewer; the repetition penalty and its window, step by step."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from tinygrad import Tensor, TinyJit, dtypes
from apps.sampling import Params, Sampler, _argmax_rows, _kth_key, _order_key
from nvcc import needs_nvcc, run_nvcc_script

def reference_kept(logits: np.ndarray, p: Params) -> set[int]:
  x = logits.astype(np.float64)
  order = np.argsort(-x, kind="stable")
  keep = np.zeros(len(x), bool)
  keep[order[:p.top_k or len(x)]] = True
  probs = np.where(keep, np.exp(x - x.max()), 0.0)
  probs /= probs.sum()
  if p.top_p < 1:   # the smallest run of the most likely tokens whose mass reaches top_p
    run = order[keep[order]]
    cut = int(np.searchsorted(np.cumsum(probs[run]), p.top_p)) + 1
    keep[run[cut:]] = False
  if p.min_p > 0: keep &= probs >= p.min_p * probs.max()
  return set(np.flatnonzero(keep).tolist())

@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 40))
def test_kth_key_is_the_kth_largest(seed, k):
  rng = np.random.default_rng(seed)
  x = rng.integers(-6, 6, size=(3, 40)).astype(np.float32) * rng.choice([0.25, 1.5], size=(3, 1)).astype(np.float32)  # ties
  s = Sampler(40, "CPU")
  keys = _order_key(Tensor(x))
  got = _kth_key(keys, Tensor.full((3, 1, 1), k, dtype=dtypes.uint32), s.digits).numpy()[:, 0]
  want = _order_key(Tensor(-np.sort(-x, axis=1)[:, k - 1:k].copy())).numpy()[:, 0]   # the key of each row's k-th largest value
  np.testing.assert_array_equal(got, want)

def test_kth_key_over_several_blocks():
  """A vocabulary of several RADIX_BLOCKs and a part of one (the padding's key 0 below every real key): top-k's threshold
  and top-p's (mass) exact at counts that cross block boundaries."""
  from apps.sampling import RADIX_BLOCK
  rng = np.random.default_rng(5)
  n = 2 * RADIX_BLOCK + 300
  x = (rng.standard_normal((2, n)) * 3).astype(np.float32)
  s = Sampler(n, "CPU")
  keys = _order_key(Tensor(x))
  for k in (1, 7, RADIX_BLOCK + 3, n):
    got = _kth_key(keys, Tensor.full((2, 1, 1), k, dtype=dtypes.uint32), s.digits).numpy()[:, 0]
    np.testing.assert_array_equal(got, _order_key(Tensor(-np.sort(-x, axis=1)[:, k - 1:k].copy())).numpy()[:, 0])
  probs = np.exp(x - x.max(1, keepdims=True)); probs /= probs.sum(1, keepdims=True)
  got = _kth_key(_order_key(Tensor(probs.astype(np.float32))), Tensor.full((2, 1, 1), 0.5), s.digits, Tensor(probs.astype(np.float32))).numpy()[:, 0]
  for r in range(2):   # the smallest probability of the shortest run of the largest ones whose mass reaches 0.5
    run = np.sort(probs[r].astype(np.float32))[::-1]
    cut = int(np.searchsorted(np.cumsum(run.astype(np.float64)), 0.5)) + 1
    assert got[r] == _order_key(Tensor(run[cut - 1:cut].copy())).numpy()[0], r

CASES = [Params(temperature=40.0, top_k=5), Params(temperature=40.0, top_p=0.5), Params(temperature=40.0, min_p=0.15),
         Params(temperature=40.0, top_k=9, top_p=0.8, min_p=0.05)]

@pytest.mark.parametrize("rows", [1, 3])
def test_drawn_tokens_are_the_kept_ones(rows):
  n, draws = 48, 300
  rng = np.random.default_rng(rows)
  for params in CASES:
    logits = (rng.standard_normal((rows, n)) * 1.5).astype(np.float32)
    want = [reference_kept(row, params) for row in logits]
    s = Sampler(n, "CPU", slots=rows)
    for slot in range(rows): s.configure(Params(**{**vars(params), "seed": 11 + slot}), [], slot)
    x = Tensor(logits).realize()
    into = Tensor.zeros(rows, dtype=dtypes.int32).contiguous().realize()
    which = Tensor(np.arange(rows, dtype=np.int32)).realize() if rows > 1 else None
    step = TinyJit(lambda: s.sample(x, into, which, params.structure).realize())
    got = [set() for _ in range(rows)]
    for _ in range(draws):
      for r, t in enumerate(step().numpy().tolist()): got[r].add(t)
    assert got == want, params   # at temperature 40 what is kept is drawn near-uniformly: 300 draws see every kept token

def test_repeat_penalty_and_its_window():
  """Greedy with llama.cpp's repetition penalty: a logit of a token among the row's last repeat_last_n tokens is divided by
  the penalty when positive, multiplied when negative, and each chosen token joins the window (the oldest leaves): the
  tokens of eight steps over the same logits are the reference's, row by row, with different windows and penalties."""
  n, rows, steps = 12, 2, 8
  rng = np.random.default_rng(3)
  logits = np.sort(rng.uniform(0.5, 2.0, (rows, n)).astype(np.float32), axis=1)[:, ::-1].copy()   # token 0 the most likely
  logits[1] -= 2.6   # the second row's all negative: the penalty multiplies them
  params = [Params(repeat_penalty=1.8, repeat_last_n=3), Params(repeat_penalty=1.3, repeat_last_n=5)]
  history = [[5, 0], [1, 2, 0, 7]]
  s = Sampler(n, "CPU", slots=rows)
  for slot in range(rows): s.configure(params[slot], history[slot], slot)
  x, into = Tensor(logits).realize(), Tensor.zeros(rows, dtype=dtypes.int32).contiguous().realize()
  which = Tensor(np.arange(rows, dtype=np.int32)).realize()
  step = TinyJit(lambda: s.sample(x, into, which, (True, True, False, False, False)).realize())
  got = [step().numpy().tolist() for _ in range(steps)]
  for r, (p, h) in enumerate(zip(params, history)):
    window, want = list(h), []
    for _ in range(steps):
      seen = set(window[-p.repeat_last_n:])
      z = [(v / p.repeat_penalty if v > 0 else v * p.repeat_penalty) if t in seen else v for t, v in enumerate(logits[r].astype(np.float64))]
      want.append(int(np.argmax(z)))
      window.append(want[-1])
    assert [g[r] for g in got] == want, (r, want)
    assert len(set(want)) >= 2   # the window moved the choice on

@pytest.mark.parametrize("rows,n", [(1, 5000), (3, 4097), (2, 8192)])
def test_argmax_rows_first_of_the_largest(rows, n):
  """Each row's index of its largest value, the first of equals, whatever the padding of the row (-inf past its end): the
  largest at the row's first and last element, tied twice, a row of -inf."""
  rng = np.random.default_rng(n)
  x = rng.standard_normal((rows, n)).astype(np.float32)
  x[0, -1] = 9.0
  if rows > 1: x[1, 0] = x[1, 7] = 9.0
  if rows > 2: x[2] = -np.inf
  assert _argmax_rows(Tensor(x)).numpy().tolist() == np.argmax(x, -1).tolist()

ARGMAX_SCRIPT = r"""
import math, re
import apps
from tinygrad import Tensor, TinyJit
from tinygrad.uop.ops import Ops
from apps.sampling import _argmax_rows
for B, V in ((1, 128256), (8, 154880)):
  x = Tensor.empty(B, V).realize()
  jit = TinyJit(lambda x: _argmax_rows(x).realize())
  for _ in range(3): jit(x)
  for call in jit.captured.linear.src:
    ast = call.src[0]
    progs = [c.src[0] for c in ast.src[0].src if c.src[0].op is Ops.PROGRAM] if ast.op is Ops.CUSTOM_FUNCTION and ast.arg == "graph" else \
            [ast] if ast.op is Ops.PROGRAM else []
    for p in progs:
      dims = math.prod(int(d) for d in re.sub(r"\x1b\[[0-9;]*m", "", p.arg.name).split("_")[1:])
      print(B, V, dims, math.prod(p.arg.global_size) * math.prod(p.arg.local_size))
"""

@needs_nvcc
def test_argmax_rows_spread_over_threads():
  """On CUDA (rendered, run on nothing) the argmax kernels that read whole rows of Youtu-LLM-2B's and GLM-4.7-Flash's
  vocabularies (128,256 = 2^8 x 501, 154,880 = 2^8 x 605) give a thread at most 64 logits of them: as the rows are, the
  heuristics gave each row 64 threads of ~2,000 in turn."""
  rows = [tuple(map(int, l.split())) for l in run_nvcc_script(ARGMAX_SCRIPT).splitlines() if l.strip()]
  whole = [(B, V, dims, threads) for B, V, dims, threads in rows if B * V <= dims < B * V + 4096 * B]
  assert len(whole) >= 3 and all(dims // threads <= 64 for _, _, dims, threads in whole), rows
