"""GGUF metadata checked at load: every key the model reads is type- and range-checked and checked against the tensors, so
a malformed file stops with one line naming the key (a corpus of each key set to 0, negative, huge, NaN and the wrong
type; a hypothesis search over keys and values; the CLI on a written file)."""
import functools, math, subprocess, sys
import pytest
from hypothesis import given, strategies as st
from apps import synth
from apps.gguf import GGUFFile, GGUFError, GGUFWriter
from apps.mla import Config
from pathlib import Path
ROOT = Path(__file__).resolve().parent.parent

PRESETS = ("glm-4.7-flash-tiny", "deepseek-v2-lite-tiny", "youtu-llm-2b-tiny")
BAD = (0, -1, 2 ** 40, 1e30, math.nan, "x", True, [1, 2])
REQUIRED = ("block_count", "rope.dimension_count", "context_length", "embedding_length", "attention.head_count", "attention.kv_lora_rank",
            "attention.layer_norm_rms_epsilon", "attention.value_length_mla", "feed_forward_length", "attention.key_length_mla")
# values a file may legitimately hold for a key (llama.cpp's fallbacks: 0 = unset)
FINE = {"expert_gating_func": (0,), "expert_weights_scale": (0,), "expert_group_count": (0,), "expert_group_used_count": (0,),
        "nextn_predict_layers": (0,), "expert_weights_norm": (True, False), "rope.scaling.yarn_log_multiplier": (0,)}

@functools.lru_cache(maxsize=None)
def tiny(preset: str) -> GGUFFile: return GGUFFile(synth.generate(preset, "release", progress=False))

def with_value(gf: GGUFFile, key: str, value) -> GGUFFile:
  gf.metadata = {**gf.metadata, key: value} if value is not None else {k: v for k, v in gf.metadata.items() if k != key}
  return gf

def outcome(preset: str, key: str, value) -> str | None:
  """None if the file loads, else the error's one line."""
  gf = tiny(preset)
  original = dict(gf.metadata)
  try:
    Config.from_gguf(with_value(gf, key, value))
    return None
  except GGUFError as e: return str(e)
  finally: gf.metadata = original

@pytest.mark.parametrize("preset", PRESETS)
def test_every_key_checked(preset):
  keys = [k for k in tiny(preset).metadata if k.startswith("deepseek2.")]
  assert len(keys) >= 15
  for key in keys:
    short = key.removeprefix("deepseek2.")
    original = tiny(preset).metadata[key]
    for value in BAD + (None,):
      if value is None and short not in REQUIRED: continue  # an optional key's default applies
      same = type(value) is type(original) and value == original
      fine = any(type(value) is type(f) and value == f for f in FINE.get(short, ()))
      if same or fine: continue
      err = outcome(preset, key, value)
      if short.startswith("expert_") and "deepseek2.expert_count" not in tiny(preset).metadata:
        assert err is None or "\n" not in err  # a dense model reads no expert key
        continue
      assert err is not None, f"{preset}: {key} = {value!r} loaded"
      assert "\n" not in err and (short in err or short.split(".")[-1] in err), f"{key} = {value!r}: {err}"

@pytest.mark.parametrize("key, value, says", [
  ("block_count", 0, "block_count = 0"), ("block_count", 4, "the file has tensors of 5 blocks"),
  ("attention.kv_lora_rank", 0, "kv_lora_rank = 0"), ("attention.kv_lora_rank", 128, "kv_lora_rank 128"),
  ("rope.freq_base", 0.0, "rope.freq_base = 0.0"), ("rope.freq_base", math.inf, "rope.freq_base = inf"),
  ("embedding_length", 0, "embedding_length = 0"), ("embedding_length", 512, "tensor 'token_embd.weight' has shape [102464, 256]"),
  ("vocab_size", 0, "vocab_size = 0"), ("feed_forward_length", 0, "feed_forward_length = 0"),
  ("feed_forward_length", 1024, "feed_forward_length"), ("expert_count", 16, "expert_count"), ("expert_used_count", 9, "expert_used_count = 9"),
  ("expert_shared_count", 0, "expert_shared_count = 0"), ("leading_dense_block_count", 0, "leading_dense_block_count = 0"),
  ("attention.q_lora_rank", 0, "q_lora_rank = 0"), ("attention.head_count", 8, "head_count"), ("context_length", -5, "context_length = -5"),
  ("attention.layer_norm_rms_epsilon", "1e-6", "expected a number"), ("expert_weights_norm", 1, "expected a bool"),
  ("attention.key_length", 300, "attention.key_length = 300")])
def test_named_inconsistencies(key, value, says):
  err = outcome("glm-4.7-flash-tiny", f"deepseek2.{key}", value)
  assert err is not None and says in err and "\n" not in err, err

@given(key=st.sampled_from(sorted(k for k in tiny("glm-4.7-flash-tiny").metadata if k.startswith("deepseek2."))),
       value=st.one_of(st.integers(-2 ** 63, 2 ** 64 - 1), st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.text(max_size=8),
                       st.lists(st.integers(0, 9), max_size=3)))
def test_any_value_loads_or_names_the_problem(key, value):
  """Whatever value a key holds, loading either gives a sane Config or one GGUFError line; never another exception."""
  gf = tiny("glm-4.7-flash-tiny")
  original = dict(gf.metadata)
  try: cfg = Config.from_gguf(with_value(gf, key, value))
  except GGUFError as e:
    assert "\n" not in str(e)
    return
  finally: gf.metadata = original
  assert cfg.n_layer >= 1 and cfg.dim >= 1 and cfg.kv_lora_rank >= 1 and cfg.vocab_size >= 1 and 0 < cfg.norm_eps < 1
  assert math.isfinite(cfg.rope_theta) and cfg.rope_theta > 0 and 0 < cfg.n_expert_used <= cfg.n_expert

def test_cli_names_the_key(tmp_path):
  """The CLI on a written file whose block_count is 0: exit 1 and one line naming the key, before any loading."""
  gf = tiny("glm-4.7-flash-tiny")
  w = GGUFWriter(tmp_path / "bad.gguf")
  for k, v in gf.metadata.items():
    vt = gf.value_types[k]
    if isinstance(vt, tuple): w.add_array(k, v, vt[1])
    else: w.add(k, 0 if k == "deepseek2.block_count" else v, vt)
  for name, info in gf.tensors.items(): w.add_tensor(name, info.ne, info.type)
  w.write(lambda name: gf.tensor_data(name))
  r = subprocess.run([sys.executable, str(ROOT / "apps" / "llm.py"), "--model", str(tmp_path / "bad.gguf"), "-p", "hi", "-n", "1"],
                     capture_output=True, text=True, timeout=300)
  assert r.returncode == 1 and "metadata deepseek2.block_count = 0" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
