"""apps/synth.py: random quant blocks against gguf-py's dequantizer, determinism, round trips through our reader and gguf-py's,
key/value layout against gguf-py's writer driven like llama.cpp's converter, parameter counts against transformers, and
loading in llama.cpp (live when llama_cpp is installed, else the recorded result)."""
import dataclasses, hashlib, json, math, os, subprocess, sys
from pathlib import Path
import numpy as np
import pytest
from apps import synth
from apps.gguf import BLOCK, GGMLType, GGUFFile
from apps.vocab import vocab_file

gguf = pytest.importorskip("gguf")
ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "test" / "goldens" / "llamacpp_load.json"

TYPES = ["F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K"]

def _dequant(raw: np.ndarray, typ: GGMLType) -> np.ndarray:
  qt = gguf.GGMLQuantizationType[typ.name]
  per, size = BLOCK[typ]
  return gguf.quants.dequantize(raw.reshape(-1, size), qt).reshape(-1).astype(np.float64)

# ---------------------------------------------------------------- random_blocks

@pytest.mark.parametrize("name", TYPES)
@pytest.mark.parametrize("std", [0.02, 1.5])
def test_random_blocks_statistics(name, std):
  typ = GGMLType[name]
  n = 256 * 1024
  raw = synth.random_blocks(typ, n, np.random.default_rng(7), std)
  assert raw.dtype == np.uint8 and raw.size == n // BLOCK[typ][0] * BLOCK[typ][1]
  x = _dequant(raw, typ)
  assert x.size == n and np.isfinite(x).all()
  assert abs(x.mean()) < 0.02 * std
  assert x.std() == pytest.approx(std, rel=0.05)
  per = 32 if typ in (GGMLType.Q4_K, GGMLType.Q5_K) else 16 if typ == GGMLType.Q6_K else BLOCK[typ][0]
  if per > 1:
    sub = x.reshape(-1, per)
    # the mins (or the offset) cancel each (sub-)block's mean down to sampling noise (~std/sqrt(per)): a mis-packed
    # scale/min would leave offsets of the order of std
    assert np.sqrt(np.mean(sub.mean(1) ** 2)) < 1.5 / math.sqrt(per) * std
    # block scales vary, so a kernel that reads the wrong block's scale gives wrong numbers
    spread = sub.std(1)
    assert np.percentile(spread, 90) > 1.8 * np.percentile(spread, 10)

def test_random_blocks_stream_and_errors():
  a = synth.random_blocks(GGMLType.Q4_K, 512, np.random.PCG64(3), 1.0)
  b = synth.random_blocks(GGMLType.Q4_K, 512, np.random.Generator(np.random.PCG64(3)), 1.0)
  assert np.array_equal(a, b)  # only the raw bit stream is used: a Generator or its bit generator give the same bytes
  with pytest.raises(ValueError, match="whole number"): synth.random_blocks(GGMLType.Q4_K, 300, np.random.PCG64(0), 1.0)
  with pytest.raises(ValueError, match="std"): synth.random_blocks(GGMLType.Q8_0, 64, np.random.PCG64(0), float("nan"))

# ---------------------------------------------------------------- plan, counts, metadata

def _hf_model_params(cfg) -> int:
  torch = pytest.importorskip("torch")
  transformers = pytest.importorskip("transformers")
  with torch.device("meta"): model = transformers.AutoModelForCausalLM.from_config(cfg)
  return sum(p.numel() for p in model.parameters())

DSV2_LITE_CONFIG = dict(vocab_size=102400, hidden_size=2048, intermediate_size=10944, moe_intermediate_size=1408, num_hidden_layers=27,
                        num_attention_heads=16, num_key_value_heads=16, n_shared_experts=2, n_routed_experts=64, num_experts_per_tok=6,
                        first_k_dense_replace=1, kv_lora_rank=512, q_lora_rank=None, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128)

def test_param_counts_match_transformers():
  transformers = pytest.importorskip("transformers")
  glm = transformers.Glm4MoeLiteConfig()  # its defaults are GLM-4.7-Flash's published config
  n_moe = glm.num_hidden_layers - 1
  # the GGUF also stores exp_probs_b, which transformers keeps as a buffer (e_score_correction_bias), not a parameter
  assert synth.param_counts("glm-4.7-flash")["total"] == _hf_model_params(glm) + n_moe * glm.n_routed_experts
  assert synth.param_counts("deepseek-v2-lite")["total"] == _hf_model_params(transformers.DeepseekV2Config(**DSV2_LITE_CONFIG))
  assert synth.param_counts("youtu-llm-2b")["total"] == _hf_model_params(transformers.YoutuConfig())

def test_param_counts_match_published():
  c = {n: synth.param_counts(n) for n in ("glm-4.7-flash", "deepseek-v2-lite", "youtu-llm-2b")}
  assert c["deepseek-v2-lite"]["total"] / 1e9 == pytest.approx(15.7, abs=0.05)          # "15.7B total"
  assert (c["deepseek-v2-lite"]["active"] - c["deepseek-v2-lite"]["embedding"]) / 1e9 == pytest.approx(2.4, abs=0.1)  # "2.4B active"
  assert c["youtu-llm-2b"]["total"] / 1e9 == pytest.approx(1.96, abs=0.005)             # "1.96B"
  assert c["glm-4.7-flash"]["total"] / 1e9 == pytest.approx(30, abs=0.5)                # "30B-A3B"
  mtp = synth.param_counts(dataclasses.replace(synth.PRESETS["glm-4.7-flash"], n_nextn=1))
  assert 0.6e9 < mtp["total"] - c["glm-4.7-flash"]["total"] < 0.7e9 and mtp["active"] == c["glm-4.7-flash"]["active"]

def test_plan_is_what_llamacpp_expects():
  for name, p in synth.PRESETS.items():
    for mix in synth.MIXES:
      tensors = synth.plan(name, mix)
      names = [t[0] for t in tensors]
      assert len(names) == len(set(names))
      for tname, ne, typ in tensors:
        assert ne[0] % BLOCK[typ][0] == 0, (name, mix, tname)
        if len(ne) == 1 or ".ffn_gate_inp." in tname or mix == "f32": assert typ == GGMLType.F32
      moe = [i for i in range(p.n_layer) if f"blk.{i}.ffn_gate_exps.weight" in names]
      assert moe == (list(range(p.n_dense_lead, p.n_layer)) if p.is_moe else [])
      assert ("output.weight" in names) != p.tied and ("blk.0.attn_q.weight" in names) == (p.q_lora == 0)
      exps = dict((t[0], t[1]) for t in tensors).get(f"blk.{p.n_dense_lead}.ffn_down_exps.weight")
      if exps: assert exps == (p.n_ff_exp, p.n_embd, p.n_expert)  # expert-major: the expert index is the outermost dimension
  rel = {t[0]: t[2] for t in synth.plan("glm-4.7-flash", "release")}
  assert rel["output.weight"] == GGMLType.Q6_K and rel["blk.5.ffn_down_shexp.weight"] == GGMLType.Q6_K
  assert rel["blk.5.ffn_up_shexp.weight"] == rel["blk.5.ffn_gate_shexp.weight"] == GGMLType.Q5_K
  assert rel["blk.5.ffn_up_exps.weight"] == rel["blk.5.attn_k_b.weight"] == rel["blk.0.ffn_down.weight"] == GGMLType.Q4_0
  assert rel["blk.5.exp_probs_b.bias"] == rel["blk.5.ffn_gate_inp.weight"] == GGMLType.F32
  kq = {t[0]: t[2] for t in synth.plan("deepseek-v2-lite", "kquant")}
  # rows of 1408 and 128 are not multiples of 256: llama-quantize falls back to 32-blocks there
  assert kq["blk.3.ffn_down_exps.weight"] == GGMLType.Q8_0 and kq["blk.3.attn_k_b.weight"] == GGMLType.Q5_1
  assert kq["blk.3.ffn_down_shexp.weight"] == GGMLType.Q6_K and kq["blk.3.ffn_up_exps.weight"] == GGMLType.Q4_K

def _converter_kv(p: synth.Preset, hf: dict) -> dict:
  """The architecture keys llama.cpp's converter writes (conversion/base.py + deepseek.py + glm.py), via gguf-py's writer."""
  w = gguf.GGUFWriter(None, "deepseek2")
  w.add_block_count(hf["num_hidden_layers"] + hf.get("num_nextn_predict_layers", 0))
  w.add_context_length(hf["max_position_embeddings"]); w.add_embedding_length(hf["hidden_size"])
  w.add_feed_forward_length(hf["intermediate_size"]); w.add_head_count(hf["num_attention_heads"]); w.add_head_count_kv(1)
  if hf.get("rope_scaling"):
    rs = hf["rope_scaling"]
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN); w.add_rope_scaling_factor(rs["factor"])
    w.add_rope_scaling_orig_ctx_len(rs["original_max_position_embeddings"])
    w.add_rope_scaling_yarn_beta_fast(rs["beta_fast"]); w.add_rope_scaling_yarn_beta_slow(rs["beta_slow"])
    w.add_rope_scaling_yarn_log_mul(0.1 * rs["mscale_all_dim"])
  w.add_rope_freq_base(hf["rope_theta"]); w.add_layer_norm_rms_eps(hf["rms_norm_eps"])
  moe = hf.get("n_routed_experts") is not None
  if moe:
    w.add_expert_count(hf["n_routed_experts"]); w.add_expert_used_count(hf["num_experts_per_tok"])
    w.add_expert_group_count(hf["n_group"]); w.add_expert_group_used_count(hf["topk_group"])
    w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID if hf["scoring_func"] == "sigmoid" else gguf.ExpertGatingFuncType.SOFTMAX)
  w.add_leading_dense_block_count(hf["first_k_dense_replace"] if moe else hf["num_hidden_layers"])
  w.add_vocab_size(hf["vocab_size"])
  if hf.get("q_lora_rank") is not None: w.add_q_lora_rank(hf["q_lora_rank"])
  w.add_kv_lora_rank(hf["kv_lora_rank"]); w.add_key_length(hf["kv_lora_rank"] + hf["qk_rope_head_dim"]); w.add_value_length(hf["kv_lora_rank"])
  w.add_key_length_mla(hf["qk_nope_head_dim"] + hf["qk_rope_head_dim"]); w.add_value_length_mla(hf["v_head_dim"])
  w.add_expert_feed_forward_length(hf.get("moe_intermediate_size", hf["intermediate_size"]))
  w.add_expert_shared_count(hf.get("n_shared_experts", 0))
  if "routed_scaling_factor" in hf: w.add_expert_weights_scale(hf["routed_scaling_factor"])
  if hf.get("norm_topk_prob"): w.add_expert_weights_norm(True)
  w.add_rope_dimension_count(hf["qk_rope_head_dim"])
  if hf.get("num_nextn_predict_layers"): w.add_nextn_predict_layers(hf["num_nextn_predict_layers"])
  return {k: v for k, v in w.kv_data[0].items() if k.startswith("deepseek2.")}

# the published config.json values (GLM with its MTP block enabled, as the converter exports it by default). The gating function
# is given for every MoE model: synth always writes the key, since llama.cpp otherwise guesses it from the block count and vocab.
HF_CONFIGS = {
  "glm-4.7-flash": dict(num_hidden_layers=47, num_nextn_predict_layers=1, max_position_embeddings=202752, hidden_size=2048,
                        intermediate_size=10240, moe_intermediate_size=1536, num_attention_heads=20, rope_theta=1e6, rms_norm_eps=1e-5,
                        n_routed_experts=64, num_experts_per_tok=4, n_group=1, topk_group=1, scoring_func="sigmoid", first_k_dense_replace=1,
                        vocab_size=154880, q_lora_rank=768, kv_lora_rank=512, qk_nope_head_dim=192, qk_rope_head_dim=64, v_head_dim=256,
                        n_shared_experts=1, routed_scaling_factor=1.8, norm_topk_prob=True),
  "deepseek-v2-lite": dict(num_hidden_layers=27, max_position_embeddings=163840, hidden_size=2048, intermediate_size=10944,
                           moe_intermediate_size=1408, num_attention_heads=16, rope_theta=10000, rms_norm_eps=1e-6, n_routed_experts=64,
                           num_experts_per_tok=6, n_group=1, topk_group=1, scoring_func="softmax", first_k_dense_replace=1, vocab_size=102400,
                           q_lora_rank=None, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128, n_shared_experts=2,
                           routed_scaling_factor=1.0, norm_topk_prob=False,
                           rope_scaling=dict(type="yarn", factor=40, original_max_position_embeddings=4096, beta_fast=32, beta_slow=1,
                                             mscale=0.707, mscale_all_dim=0.707)),
  "youtu-llm-2b": dict(num_hidden_layers=32, max_position_embeddings=131072, hidden_size=2048, intermediate_size=6144, num_attention_heads=16,
                       rope_theta=10000.0, rms_norm_eps=1e-6, vocab_size=128256, q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128,
                       qk_rope_head_dim=64, v_head_dim=128),
}

@pytest.mark.parametrize("name", list(HF_CONFIGS))
def test_metadata_matches_converter(name):
  p = synth.PRESETS[name]
  if name == "glm-4.7-flash": p = dataclasses.replace(p, n_nextn=1)
  ours = {k: (v, t) for k, v, t, arr in synth.metadata(p, "release", 0) if k.startswith("deepseek2.")}
  want = _converter_kv(p, HF_CONFIGS[name])
  assert set(ours) == set(want)
  for k, gv in want.items():
    v, t = ours[k]
    assert t.value == gv.type.value, k
    assert (v == pytest.approx(gv.value, rel=1e-6)) if isinstance(gv.value, float) else v == gv.value, k

# ---------------------------------------------------------------- files

def _sha(path: Path) -> str:
  return hashlib.sha256(path.read_bytes()).hexdigest()

def test_deterministic_and_order_free(tmp_path):
  name, mix = "glm-4.7-flash-tiny", "kquant"
  a = synth.write(name, tmp_path / "a.gguf", mix, seed=5, progress=False, workers=1)
  b = synth.write(name, tmp_path / "b.gguf", mix, seed=5, progress=False, workers=3)
  c = synth.write(name, tmp_path / "c.gguf", mix, seed=6, progress=False, workers=2)
  assert _sha(a) == _sha(b) != _sha(c)
  with GGUFFile(a) as fa, GGUFFile(c) as fc:  # every tensor changes with the seed
    assert all(not np.array_equal(fa.tensor_data(n), fc.tensor_data(n)) for n in fa.tensors)
  assert not list(tmp_path.glob("*.part"))

def test_cache_keys_and_bad_input(tmp_path):
  p = synth.PRESETS["youtu-llm-2b-tiny"]
  assert synth.cache_path(p, "q8_0", 3) != synth.cache_path(dataclasses.replace(p, n_layer=3), "q8_0", 3)
  assert f"g{synth.GENERATOR_VERSION}" in synth.cache_path(p).name
  with pytest.raises(ValueError, match="unknown preset 'nope'"): synth.generate("nope")
  with pytest.raises(ValueError, match="unknown quant mix 'q3'"): synth.generate(p, "q3")
  with pytest.raises(ValueError, match="seed"): synth.generate(p, seed=-1)
  r = subprocess.run([sys.executable, "-m", "apps.synth", "nope"], cwd=ROOT, capture_output=True, text=True)
  assert r.returncode == 1 and r.stderr.strip().count("\n") == 0 and "unknown preset 'nope'" in r.stderr

@pytest.mark.parametrize("name", synth.TINY)
def test_round_trip(name):
  mix = "release"
  p = synth.PRESETS[name]
  path = synth.generate(name, mix, progress=False)
  tensors = synth.plan(name, mix)
  with GGUFFile(path) as f:
    assert [(t.name, t.ne, t.type) for t in f.tensors.values()] == tensors
    for tname, ne, typ in tensors: assert np.array_equal(f.tensor_data(tname), synth.tensor_data(p, tname, ne, typ, 0)), tname
    md = f.metadata
    assert md["general.architecture"] == "deepseek2" and md["synth.generator_version"] == synth.GENERATOR_VERSION
    assert md["deepseek2.block_count"] == p.n_layer and md["deepseek2.vocab_size"] == p.n_vocab
    assert ("deepseek2.attention.q_lora_rank" in md) == (p.q_lora > 0)
    assert md["tokenizer.chat_template"] == (synth.TEMPLATES / f"{p.template}.jinja").read_text(encoding="utf-8")
    toks, types = md["tokenizer.ggml.tokens"], md["tokenizer.ggml.token_type"]
    assert len(toks) == len(types) == p.n_vocab
    with GGUFFile(vocab_file("deepseek-llm")) as v:  # the real tokenizer is kept whole
      assert toks[:len(v.metadata["tokenizer.ggml.tokens"])] == v.metadata["tokenizer.ggml.tokens"]
      assert md["tokenizer.ggml.merges"] == v.metadata["tokenizer.ggml.merges"]
    for role in ("bos", "eos"): assert types[md[f"tokenizer.ggml.{role}_token_id"]] == synth.CONTROL
  if name != "glm-4.7-flash-tiny": return  # gguf-py's reader takes seconds on the 100k-token vocabulary: one preset will do
  # gguf-py reads the same file: names, shapes, types, and the dequantized weights are sane
  r = gguf.GGUFReader(path)
  assert [(t.name, tuple(int(d) for d in t.shape), t.tensor_type.name) for t in r.tensors] == [(n, ne, t.name) for n, ne, t in tensors]
  for t in r.tensors:
    if t.n_elements > 1 << 21: continue  # the embedding tables: slow to dequantize in gguf-py, same code path as the rest
    x = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type).astype(np.float64)
    assert np.isfinite(x).all()
    mean, std = synth._init(p, t.name, tuple(int(d) for d in t.shape))
    assert abs(x.mean() - mean) < 5 * std / math.sqrt(x.size), t.name
    if x.size >= 1024: assert x.std() == pytest.approx(std, rel=0.1), t.name

def test_templates_render_special_tokens():
  jinja2 = pytest.importorskip("jinja2")
  msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}, {"role": "assistant", "content": "a"},
          {"role": "user", "content": "v"}]
  for name in synth.PRESETS:
    tokens, types, _, ids, _ = synth.vocab(name)
    out = jinja2.Environment().from_string(synth.template_text(name)).render(
      messages=msgs, add_generation_prompt=True, bos_token=tokens[ids["bos"]], eos_token=tokens[ids["eos"]])
    specials = synth.special_ids(name)
    used = [t for t in specials if t in out]
    assert tokens[ids["bos"]] in used and len(used) >= 2, name
    for t in specials: assert tokens[specials[t]] == t and types[specials[t]] in (synth.CONTROL, synth.USER_DEFINED)

# ---------------------------------------------------------------- llama.cpp

def test_recorded_llamacpp_load():
  """The committed result of tools/check_llamacpp_load.py covers every tiny preset x mix, all passed, for these very files."""
  from tools import check_llamacpp_load as chk
  rec = json.loads(GOLDEN.read_text())
  assert rec["generator_version"] == synth.GENERATOR_VERSION
  got = {(r["preset"], r["mix"], r["nextn"]): r for r in rec["tiny"]}
  assert set(got) == set(chk.variants())
  for (name, mix, nextn), r in got.items():
    p = chk._preset(name, nextn)
    assert r["ok"] and r["finite"] and r["specials_single_token"] and r["n_vocab"] == p.n_vocab and r["n_tokens"] >= 8
    assert r["sha256"] == chk.sha256(synth.generate(p, mix, r["seed"], progress=False)), f"{name} {mix}: regenerate the golden"
  for r in rec.get("full", []): assert r["ok"] and r["finite"], r["preset"]

def test_llamacpp_live():
  pytest.importorskip("llama_cpp")
  from tools import check_llamacpp_load as chk
  rec = chk.check(log=lambda s: None)
  assert all(r["ok"] for r in rec["tiny"]), [r for r in rec["tiny"] if not r["ok"]]
  want = {(r["preset"], r["mix"], r["nextn"]): r["sha256"] for r in json.loads(GOLDEN.read_text())["tiny"]}
  assert {(r["preset"], r["mix"], r["nextn"]): r["sha256"] for r in rec["tiny"]} == want

MAKER = """
import os, sys, time
from pathlib import Path
import apps
from apps import synth
ready, go = Path(sys.argv[1]), Path(sys.argv[2])
ready.touch()
while not go.exists(): time.sleep(0.01)
print(synth.generate("youtu-llm-2b-tiny", "q8_0", seed=7, progress=False))
"""

def test_two_processes_make_one_file(tmp_path):
  # two processes (test workers, two CLIs) asking for the same uncached file at once: one writes it, the other waits for it
  # (without the cache lock both wrote one .part file, and the second rename found it gone)
  env = {**os.environ, "TINYGRAD_MLA_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(Path(__file__).parent.parent)}
  procs = [subprocess.Popen([sys.executable, "-c", MAKER, str(tmp_path / f"ready{i}"), str(tmp_path / "go")], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
  while not all((tmp_path / f"ready{i}").exists() for i in range(2)): assert all(p.poll() is None for p in procs)
  (tmp_path / "go").touch()
  outs = [p.communicate(timeout=300) for p in procs]
  assert all(p.returncode == 0 for p in procs), [e[-2000:] for _, e in outs]
  paths = {o.strip() for o, _ in outs}
  assert len(paths) == 1 and not list((tmp_path / "cache" / "models").glob("*.part"))
  want = synth.write("youtu-llm-2b-tiny", tmp_path / "alone.gguf", "q8_0", seed=7, progress=False)
  assert Path(paths.pop()).read_bytes() == want.read_bytes()
