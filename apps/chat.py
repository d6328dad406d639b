"""Chat prompts: a GGUF's tokenizer.chat_template rendered with jinja2, and the token bookkeeping for multi-turn KV reuse.

Rendering follows HF transformers' apply_chat_template (the environment the templates are written for): a sandboxed
jinja2 environment with trim_blocks/lstrip_blocks, loop controls, an HTML-safe-free `tojson`, `raise_exception`,
`strftime_now`, and the variables messages, add_generation_prompt, bos_token, eos_token, tools (plus any extra such
as enable_thinking). A GGUF without a template gets llama.cpp's fallback, ChatML (`<|im_start|>role\\ncontent<|im_end|>\\n`).

Prompt ids follow llama.cpp's server: bos_token/eos_token are the texts of the vocab's BOS/EOS; when the vocab adds
BOS itself (tokenizer.ggml.add_bos_token) a leading bos_token text is removed from the rendered prompt, and the prompt
is tokenized with add_special=True, parse_special=True (so "<|user|>" in the template becomes its control token).

Multi-turn KV reuse (the contract; llama.cpp's server and ollama do the same):
  1. Each turn, render the whole conversation and tokenize it: `ids = tmpl.encode(tok, messages)`.
  2. `n_keep, new = reuse(cached, ids)`, where `cached` lists exactly the tokens whose K/V entries are in the cache, in
     order (the previous prompt plus the generated tokens that were fed back; a sampled EOG token that was never fed
     is not in it). Keep the first n_keep cache positions, drop the rest, run `new` at positions n_keep.. .
  3. After generating, add the reply as an assistant message (its text, without the EOG token) and set
     `cached = ids + fed_generated_tokens`.
Tokenizing the whole prompt and comparing ids, rather than tokenizing only the new text, is what makes this exact:
BPE of a text split in two can differ from BPE of the whole, and templates may re-render earlier turns differently
(GLM-4.7 drops the reasoning of earlier assistant turns), which simply ends the common prefix earlier.
"""
from __future__ import annotations
import json
from datetime import datetime
from typing import Any, Sequence
import jinja2, jinja2.ext, jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROLES = ("system", "user", "assistant", "tool")

# llama.cpp's template for a model without one (common/chat.cpp CHATML_TEMPLATE_SRC)
FALLBACK_TEMPLATE = ("{%- for message in messages -%}\n  {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' -}}\n"
                     "{%- endfor -%}\n{%- if add_generation_prompt -%}\n  {{- '<|im_start|>assistant\\n' -}}\n{%- endif -%}")

class ChatError(ValueError):
  """A bad conversation or a template that cannot render it; the message is one line naming the problem."""

class _TemplateRaised(ChatError):
  pass

class _GenerationTag(jinja2.ext.Extension):
  """HF's `{% generation %}...{% endgeneration %}` marks assistant text for training masks; here it renders its body."""
  tags = {"generation"}
  def parse(self, parser):
    lineno = next(parser.stream).lineno
    body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
    return jinja2.nodes.Scope(body).set_lineno(lineno)

def _raise_exception(message: str):
  raise _TemplateRaised(f"the chat template rejected the conversation: {message}")

def _tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None, separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
  return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

def _environment() -> ImmutableSandboxedEnvironment:
  env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[_GenerationTag, jinja2.ext.loopcontrols])
  env.filters["tojson"] = _tojson
  env.globals["raise_exception"] = _raise_exception
  env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
  return env

def check_messages(messages: Any) -> None:
  """Raise ChatError unless `messages` is a non-empty list of {'role': known role, 'content': str or list of parts} dicts
  (an assistant message with tool_calls may have no content)."""
  if not isinstance(messages, (list, tuple)): raise ChatError(f"messages must be a list of dicts, not {type(messages).__name__}")
  if not messages: raise ChatError("messages is empty")
  for i, m in enumerate(messages):
    if not isinstance(m, dict): raise ChatError(f"message {i} is a {type(m).__name__}, not a dict with 'role' and 'content'")
    role = m.get("role")
    if role is None: raise ChatError(f"message {i} has no 'role'")
    if role not in ROLES: raise ChatError(f"message {i} has unknown role {role!r} (expected one of {', '.join(ROLES)})")
    if "content" not in m:
      if role == "assistant" and m.get("tool_calls"): continue
      raise ChatError(f"message {i} ({role}) has no 'content'")
    c = m["content"]
    if c is None and role == "assistant" and m.get("tool_calls"): continue
    if isinstance(c, str): continue
    if isinstance(c, list) and all(isinstance(p, (str, dict)) for p in c): continue
    raise ChatError(f"message {i} ({role}) has content of type {type(c).__name__}: expected a string or a list of content parts")

class ChatTemplate:
  """A jinja2 chat template with the BOS/EOS texts and flags of its vocab."""

  def __init__(self, source: str, bos_token: str = "", eos_token: str = "", add_bos: bool = False, add_eos: bool = False,
               is_fallback: bool = False):
    if not isinstance(source, str): raise ChatError(f"a chat template must be a string, not {type(source).__name__}")
    self.source, self.bos_token, self.eos_token, self.add_bos, self.add_eos = source, bos_token, eos_token, add_bos, add_eos
    self.is_fallback = is_fallback
    try: self._template = _environment().from_string(source)
    except jinja2.TemplateSyntaxError as e: raise ChatError(f"chat template syntax error at line {e.lineno}: {e.message}") from None

  @classmethod
  def from_gguf(cls, gf, tok=None) -> "ChatTemplate":
    """tokenizer.chat_template of `gf` (else FALLBACK_TEMPLATE), with BOS/EOS from `tok` (built from `gf` when not given)."""
    if tok is None:
      from apps.tokenizer import Tokenizer
      tok = Tokenizer.from_gguf(gf)
    source = gf.get("tokenizer.chat_template")
    fallback = not isinstance(source, str) or not source.strip()
    text = lambda i: "" if i is None else tok.token_to_bytes(i).decode("utf-8", "replace")
    return cls(FALLBACK_TEMPLATE if fallback else source, text(tok.bos_id), text(tok.eos_id), tok.add_bos, tok.add_eos, fallback)

  def render(self, messages: list[dict], add_generation_prompt: bool = True, tools: list[dict] | None = None, **extra: Any) -> str:
    """The template's output for `messages` (raw: a bos_token the template writes is kept)."""
    check_messages(messages)
    try:
      return self._template.render(messages=list(messages), add_generation_prompt=add_generation_prompt, tools=tools,
                                   bos_token=self.bos_token, eos_token=self.eos_token, **extra)
    except ChatError: raise
    except jinja2.TemplateError as e: raise ChatError(f"the chat template failed: {type(e).__name__}: {e}") from None
    except (TypeError, KeyError, AttributeError, IndexError, ValueError) as e:
      raise ChatError(f"the chat template failed on these messages: {type(e).__name__}: {e}") from None

  def prompt(self, messages: list[dict], add_generation_prompt: bool = True, **extra: Any) -> str:
    """render(), less a leading bos_token / trailing eos_token text when the tokenizer adds BOS / EOS itself (as llama.cpp)."""
    out = self.render(messages, add_generation_prompt, **extra)
    if self.add_bos and self.bos_token and out.startswith(self.bos_token): out = out[len(self.bos_token):]
    if self.add_eos and self.eos_token and out.endswith(self.eos_token): out = out[:-len(self.eos_token)]
    return out

  def encode(self, tok, messages: list[dict], add_generation_prompt: bool = True, **extra: Any) -> list[int]:
    """Token ids of the prompt: tok.encode(prompt(...), add_special=True, parse_special=True)."""
    return tok.encode(self.prompt(messages, add_generation_prompt, **extra), add_special=True, parse_special=True)

def reuse(cached: Sequence[int], ids: Sequence[int]) -> tuple[int, list[int]]:
  """(n_keep, new): keep the first n_keep cached positions (the common prefix of `cached` and `ids`), then run `new`.

  At least one token is always left to run, since the logits for the next token come from running the last prompt token.
  """
  n, limit = 0, min(len(cached), len(ids) - 1)
  while n < limit and cached[n] == ids[n]: n += 1
  return n, list(ids[n:])
