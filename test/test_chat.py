"""apps/chat.py: rendering against llama.cpp's expectations (tests/test-chat-template.cpp), against llama-cpp-python's and
transformers' jinja2 chat formatters on the same templates (when importable), bad-message errors, and KV-reuse bookkeeping."""
import functools
from pathlib import Path
import pytest
from hypothesis import given, settings, strategies as st
from apps.chat import FALLBACK_TEMPLATE, ChatError, ChatTemplate, check_messages, reuse
from apps.gguf import GGUFFile, GGUFWriter, ValueType
from apps.tokenizer import Tokenizer
from apps.vocab import vocab_file

TEMPLATES = Path(__file__).resolve().parent.parent / "apps" / "chat_templates"

# tests/test-chat-template.cpp: its conversation, and (name, template, expected jinja output, bos_token, eos_token)
CONVERSATION = [
  {"role": "system", "content": "You are a helpful assistant"}, {"role": "user", "content": "Hello"},
  {"role": "assistant", "content": "Hi there"}, {"role": "user", "content": "Who are you"},
  {"role": "assistant", "content": "   I am an assistant   "}, {"role": "user", "content": "Another question"},
]
LLAMA_CPP_CASES = [
  ('DeepSeek-V2',
   '{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}{{ bos_token '
   "}}{% for message in messages %}{% if message['role'] == 'user' %}{{ 'User: ' + message['content'] + '\n\n' }"
   "}{% elif message['role'] == 'assistant' %}{{ 'Assistant: ' + message['content'] + eos_token }}{% elif messag"
   "e['role'] == 'system' %}{{ message['content'] + '\n\n' }}{% endif %}{% endfor %}{% if add_generation_prompt "
   "%}{{ 'Assistant:' }}{% endif %}",
   'You are a helpful assistant\n\nUser: Hello\n\nAssistant: Hi there<｜end▁of▁sentence｜>User: Who are you\n\nAss'
   'istant:    I am an assistant   <｜end▁of▁sentence｜>User: Another question\n\nAssistant:',
   '', '<｜end▁of▁sentence｜>'),
  ('ChatGLM3',
   "{% for message in messages %}{% if loop.first %}[gMASK]sop<|{{ message['role'] }}|>\n {{ message['content'] "
   "}}{% else %}<|{{ message['role'] }}|>\n {{ message['content'] }}{% endif %}{% endfor %}{% if add_generation_"
   'prompt %}<|assistant|>{% endif %}',
   '[gMASK]sop<|system|>\n You are a helpful assistant<|user|>\n Hello<|assistant|>\n Hi there<|user|>\n Who are'
   ' you<|assistant|>\n    I am an assistant   <|user|>\n Another question<|assistant|>',
   '', ''),
  ('ChatGLM4',
   "[gMASK]<sop>{% for item in messages %}{% if item['tools'] is defined %}<|system|>\n你是一个名为 ChatGLM 的人工智能助手。你是"
   "基于智谱AI训练的语言模型 GLM-4 模型开发的，你的任务是针对用户的问题和要求提供适当的答复和支持。\n\n# 可用工具{% set tools = item['tools'] %}{% for tool in "  # noqa: E501
   "tools %}{% if tool['type'] == 'function' %}\n\n## {{ tool['function']['name'] }}\n\n{{ tool['function'] | to"
   "json(indent=4) }}\n......{% endif %}{% endfor %}{% endif %}{% if item['content'] %}<|{{ item['role'] }}|>{{ "
   "item['metadata'] }}\n{{ item['content'] }}{% endif %}{% endfor %}{% if add_generation_prompt %}<|assistant|>"
   '\n{% endif %}',
   '[gMASK]<sop><|system|>\nYou are a helpful assistant<|user|>\nHello<|assistant|>\nHi there<|user|>\nWho are y'
   'ou<|assistant|>\n   I am an assistant   <|user|>\nAnother question<|assistant|>\n',
   '', ''),
  ('GLMEdge',
   "{% for item in messages %}{% if item['role'] == 'system' %}<|system|>\n{{ item['content'] }}{% elif item['ro"
   "le'] == 'user' %}<|user|>\n{{ item['content'] }}{% elif item['role'] == 'assistant' %}<|assistant|>\n{{ item"
   "['content'] }}{% endif %}{% endfor %}<|assistant|>",
   '<|system|>\nYou are a helpful assistant<|user|>\nHello<|assistant|>\nHi there<|user|>\nWho are you<|assistan'
   't|>\n   I am an assistant   <|user|>\nAnother question<|assistant|>',
   '', ''),
  ('mlabonne/AlphaMonarch-7B',
   "{% for message in messages %}{{bos_token + message['role'] + '\\n' + message['content'] + eos_token + '\\n'}"
   "}{% endfor %}{% if add_generation_prompt %}{{ bos_token + 'assistant\\n' }}{% endif %}",
   '<s>system\nYou are a helpful assistant</s>\n<s>user\nHello</s>\n<s>assistant\nHi there</s>\n<s>user\nWho are'
   ' you</s>\n<s>assistant\n   I am an assistant   </s>\n<s>user\nAnother question</s>\n<s>assistant\n',
   '<s>', '</s>'),
]

@pytest.mark.parametrize("name,template,expected,bos,eos", LLAMA_CPP_CASES, ids=[c[0] for c in LLAMA_CPP_CASES])
def test_llama_cpp_expectations(name, template, expected, bos, eos):
  assert ChatTemplate(template, bos, eos).render(CONVERSATION, add_generation_prompt=True) == expected

def test_deepseek_v2_lite_template_file():
  # the preset's template is DeepSeek-V2's, so llama.cpp's expectation for DeepSeek-V2 applies to it
  name, _, expected, bos, eos = LLAMA_CPP_CASES[0]
  assert name == "DeepSeek-V2"
  tmpl = ChatTemplate((TEMPLATES / "deepseek-v2-lite.jinja").read_text(encoding="utf-8"), bos, eos)
  assert tmpl.render(CONVERSATION) == expected
  assert tmpl.render(CONVERSATION, add_generation_prompt=False) == expected.removesuffix("Assistant:")

def test_glm_4_7_flash_template_file():
  tmpl = ChatTemplate((TEMPLATES / "glm-4.7-flash.jinja").read_text(encoding="utf-8"))
  out = tmpl.render(CONVERSATION)
  # what the template says: the [gMASK]<sop> prefix, role markers glued to the text, earlier reasoning reduced to </think>
  assert out == ("[gMASK]<sop><|system|>You are a helpful assistant<|user|>Hello<|assistant|></think>Hi there<|user|>Who are you"
                 "<|assistant|></think>I am an assistant<|user|>Another question<|assistant|><think>")
  assert tmpl.render(CONVERSATION, enable_thinking=False).endswith("<|assistant|></think>")
  assert not tmpl.render(CONVERSATION, add_generation_prompt=False).endswith("<|assistant|><think>")

# ---------------------------------------------------------------- against the reference formatters

REASONING = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "<think>\nadd them\n</think>\n\n4"},
             {"role": "user", "content": "and 3+3?"}]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
TOOL_TURN = [{"role": "user", "content": "Weather in Paris?"},
             {"role": "assistant", "content": "",
              "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
             {"role": "tool", "content": "{\"temp\": 21}"}]
CONVERSATIONS = [
  (CONVERSATION, None), ([{"role": "user", "content": "Hi"}], None),
  ([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}], None),
  (REASONING, None), (REASONING[:2], None), (TOOL_TURN, TOOLS), ([{"role": "user", "content": "\u4f60\u597d \U0001f44b \u00e9\n\n  x"}], None),
  ([{"role": "user", "content": [{"type": "text", "text": "part one"}, {"type": "text", "text": " part two"}]}], None),
]

def template_files() -> list[Path]:
  return sorted(TEMPLATES.glob("*.jinja"))

def variants():
  for conv, tools in CONVERSATIONS:
    for agp in (True, False):
      for extra in ({}, {"enable_thinking": False}):
        yield conv, tools, agp, extra

def same_as(reference, src, conv, tools, agp, extra):
  """Our rendering equals the reference's, or both fail (ours with a ChatError)."""
  try: ref = reference()
  except Exception as e:  # e.g. DeepSeek's template concatenates content and so cannot take a list of parts
    with pytest.raises(ChatError): ChatTemplate(src, BOS, EOS).render(conv, agp, tools=tools, **extra)
    return type(e)
  assert ChatTemplate(src, BOS, EOS).render(conv, agp, tools=tools, **extra) == ref, (conv, agp, extra)

BOS, EOS = "<\uff5cbegin\u2581of\u2581sentence\uff5c>", "<\uff5cend\u2581of\u2581sentence\uff5c>"

@pytest.mark.parametrize("path", template_files(), ids=lambda p: p.stem)
def test_same_as_llama_cpp_python_formatter(path):
  lcf = pytest.importorskip("llama_cpp.llama_chat_format")
  src = path.read_text(encoding="utf-8")
  for conv, tools, agp, extra in variants():
    fmt = lcf.Jinja2ChatFormatter(template=src, eos_token=EOS, bos_token=BOS, add_generation_prompt=agp)
    same_as(lambda: fmt(messages=conv, tools=tools, **extra).prompt, src, conv, tools, agp, extra)

@pytest.mark.parametrize("path", template_files(), ids=lambda p: p.stem)
def test_same_as_transformers(path):
  ctu = pytest.importorskip("transformers.utils.chat_template_utils")
  src = path.read_text(encoding="utf-8")
  for conv, tools, agp, extra in variants():
    same_as(lambda: ctu.render_jinja_template([conv], tools=tools, chat_template=src, add_generation_prompt=agp, bos_token=BOS, eos_token=EOS,
                                              **extra)[0][0], src, conv, tools, agp, extra)

def test_template_files_are_the_presets():
  assert {p.stem for p in template_files()} >= {"deepseek-v2-lite", "glm-4.7-flash", "youtu-llm-2b"}

# ---------------------------------------------------------------- GGUF, BOS/EOS, fallback

@functools.lru_cache(maxsize=None)
def deepseek_tok() -> Tokenizer:
  return Tokenizer.from_gguf(GGUFFile(vocab_file("deepseek-llm")))

def vocab_with(path: Path, **changes) -> GGUFFile:
  """llama.cpp's deepseek-llm vocab with string keys set (None removes one)."""
  gf = GGUFFile(vocab_file("deepseek-llm"))
  w = GGUFWriter(path)
  for k, v in gf.metadata.items():
    if k in changes: continue
    vt = gf.value_types[k]
    if isinstance(vt, tuple): w.add_array(k, v, vt[1])
    else: w.add(k, v, vt)
  for k, v in changes.items():
    if v is not None: w.add(k, v, ValueType.STRING)
  w.write(lambda n: b"")
  return GGUFFile(path)

def test_from_gguf(tmp_path):
  src = (TEMPLATES / "deepseek-v2-lite.jinja").read_text(encoding="utf-8")
  gf = vocab_with(tmp_path / "t.gguf", **{"tokenizer.chat_template": src})
  tok = Tokenizer.from_gguf(gf)
  tmpl = ChatTemplate.from_gguf(gf, tok)
  assert (tmpl.source, tmpl.bos_token, tmpl.eos_token, tmpl.add_bos, tmpl.is_fallback) == (src, BOS, EOS, True, False)
  msgs = [{"role": "user", "content": "Hi"}]
  assert tmpl.render(msgs) == BOS + "User: Hi\n\nAssistant:"
  # the tokenizer adds BOS, so llama.cpp drops the template's: exactly one BOS, then the text
  assert tmpl.prompt(msgs) == "User: Hi\n\nAssistant:"
  assert tmpl.encode(tok, msgs) == [tok.bos_id] + tok.encode("User: Hi\n\nAssistant:", add_special=False)
  two = [*msgs, {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "Bye"}]
  assert tmpl.encode(tok, two).count(tok.eos_id) == 1  # the eos_token text of the template becomes the control token
  assert ChatTemplate.from_gguf(gf).bos_token == BOS  # builds its own tokenizer when none is given

def test_fallback(tmp_path):
  gf = vocab_with(tmp_path / "n.gguf")
  assert "tokenizer.chat_template" not in gf.metadata
  tmpl = ChatTemplate.from_gguf(gf, deepseek_tok())
  assert tmpl.is_fallback and tmpl.source == FALLBACK_TEMPLATE
  msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"}]
  assert tmpl.render(msgs) == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
  assert tmpl.render(msgs, add_generation_prompt=False) == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
  assert ChatTemplate.from_gguf(vocab_with(tmp_path / "e.gguf", **{"tokenizer.chat_template": "  "}), deepseek_tok()).is_fallback

# ---------------------------------------------------------------- errors

@pytest.mark.parametrize("messages,match", [
  ([{"role": "robot", "content": "x"}], "unknown role 'robot'"),
  ([{"role": "user"}], "no 'content'"),
  ([{"content": "x"}], "no 'role'"),
  ([{"role": "user", "content": 3}], "content of type int"),
  ([{"role": "user", "content": [1, 2]}], "content of type list"),
  (["hello"], "message 0 is a str"),
  ([], "empty"),
  ({"role": "user", "content": "x"}, "must be a list"),
  ([{"role": "user", "content": "x"}, {"role": "assistant", "content": None}], "message 1 \\(assistant\\)"),
])
def test_bad_messages(messages, match):
  with pytest.raises(ChatError, match=match): ChatTemplate(FALLBACK_TEMPLATE).render(messages)

def test_ok_messages():
  check_messages([{"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "f", "arguments": {}}}]}])
  check_messages([{"role": "tool", "content": "{}"}, {"role": "user", "content": [{"type": "text", "text": "a"}]}])

def test_template_errors():
  with pytest.raises(ChatError, match="syntax error"): ChatTemplate("{% for m in messages %}")
  with pytest.raises(ChatError, match="rejected the conversation: roles must alternate"):
    ChatTemplate("{% if messages[0].role != 'user' %}{{ raise_exception('roles must alternate') }}{% endif %}").render(CONVERSATION)
  with pytest.raises(ChatError, match="failed"): ChatTemplate("{{ messages[0].content.nope() }}").render(CONVERSATION)
  with pytest.raises(ChatError, match="failed"): ChatTemplate("{{ messages.__class__.__mro__ }}{{ ''.__class__.mro() }}").render(CONVERSATION)
  assert issubclass(ChatError, ValueError)

# ---------------------------------------------------------------- multi-turn KV reuse

def test_reuse_deepseek_turns():
  tok = deepseek_tok()
  tmpl = ChatTemplate((TEMPLATES / "deepseek-v2-lite.jinja").read_text(encoding="utf-8"), BOS, EOS, add_bos=True)
  msgs = [{"role": "user", "content": "Hi there"}]
  ids1 = tmpl.encode(tok, msgs)
  reply = tok.encode(" Hello! How can I help?", add_special=False)
  cached = ids1 + reply  # the sampled EOS was never fed, so its K/V is not in the cache
  msgs += [{"role": "assistant", "content": "Hello! How can I help?"}, {"role": "user", "content": "Tell me a joke."}]
  ids2 = tmpl.encode(tok, msgs)
  n_keep, new = reuse(cached, ids2)
  assert cached[:n_keep] + new == ids2
  assert n_keep == len(cached)  # the whole previous turn is reused: only the EOS and the new user turn run
  assert tok.decode(new) == EOS + "User: Tell me a joke.\n\nAssistant:"

def test_reuse_glm_drops_old_reasoning():
  tok = deepseek_tok()
  tmpl = ChatTemplate((TEMPLATES / "glm-4.7-flash.jinja").read_text(encoding="utf-8"))
  msgs = [{"role": "user", "content": "Hi"}]
  ids1 = tmpl.encode(tok, msgs)
  cached = ids1 + tok.encode("Let me think.</think>Hello!", add_special=False)
  msgs += [{"role": "assistant", "content": "<think>Let me think.</think>Hello!"}, {"role": "user", "content": "Bye"}]
  ids2 = tmpl.encode(tok, msgs)
  n_keep, new = reuse(cached, ids2)
  assert cached[:n_keep] + new == ids2
  # the template re-renders the earlier turn as <|assistant|></think>Hello!: reuse stops where "<think>" was
  prefix = tok.encode("[gMASK]<sop><|user|>Hi<|assistant|>")  # this vocab has no GLM control tokens: "|>" can merge on
  assert len(prefix) - 2 <= n_keep < len(ids1)

def test_reuse_edges():
  assert reuse([1, 2, 3], [1, 2, 3]) == (2, [3])  # the last prompt token always runs (its logits are needed)
  assert reuse([], [5, 6]) == (0, [5, 6])
  assert reuse([1, 2, 3, 4], [1, 2]) == (1, [2])
  assert reuse([9], [1, 2]) == (0, [1, 2])

@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 3), max_size=12), st.lists(st.integers(0, 3), min_size=1, max_size=12))
def test_reuse_property(cached, ids):
  n, new = reuse(cached, ids)
  assert cached[:n] == ids[:n] and ids[:n] + new == ids and len(new) >= 1
  assert n == len(ids) - 1 or n == len(cached) or cached[n] != ids[n]  # the common prefix is maximal
