"""GGUF byte-level BPE tokenizer ("gpt2" tokenizer model) that gives llama.cpp's token ids.

llama.cpp (src/llama-vocab.cpp, src/unicode.cpp) is the reference, and its quirks are reproduced on purpose:
- Pre-tokenization runs the pre type's list of regexes one after another; each regex splits every piece left by
  the previous one into its matches and the gaps between them.
- llama.cpp runs those regexes with C++ std::regex (ECMAScript) on code points, not with a Unicode regex engine:
  `\\s` is ASCII whitespace only, and non-ASCII whitespace is first replaced by \\x0b. A regex using `\\p{..}` runs
  on a "collapsed" text in which every non-ASCII code point is one byte naming its category (so `\\p{Lu}` is any
  letter). `$` is the end of the piece. Its hand-written splitters (gpt2, llama3, qwen2) behave like their regex.
- Unicode categories are llama.cpp's, which come from Unicode 15.1: code points assigned later are undefined there.
- BPE merges lowest rank first (leftmost on ties) with a heap, as llm_tokenizer_bpe_session does; some pre types
  (llama3, glm4, youtu) first look the whole word up in the vocab (ignore_merges).
- Special tokens are split off before pre-tokenization, longest first; control tokens only with parse_special.

Streaming: `StreamDecoder(tok).add(id)` returns only complete UTF-8 text; an incomplete multi-byte sequence is held
back until the tokens that finish it arrive, and `flush()` returns what is left (U+FFFD for broken bytes).
"""
from __future__ import annotations
import bisect, codecs, heapq, itertools, operator, re
from typing import Iterable
import regex

class TokenizerError(ValueError):
  """A tokenizer problem (unsupported file, bad id, bad input); the message is one line naming it."""

# ---------------------------------------------------------------- unicode, as llama.cpp sees it

# llama_token_attr bits and the GGUF token types that map onto them
ATTR_UNKNOWN, ATTR_UNUSED, ATTR_NORMAL, ATTR_CONTROL, ATTR_USER_DEFINED, ATTR_BYTE = 1, 2, 4, 8, 16, 32
_TYPE_ATTR = {0: 0, 1: ATTR_NORMAL, 2: ATTR_UNKNOWN, 3: ATTR_CONTROL, 4: ATTR_USER_DEFINED, 5: ATTR_UNUSED, 6: ATTR_BYTE}

# Unicode's White_Space code points (llama.cpp's unicode_set_whitespace)
_WHITESPACE = frozenset([*range(0x9, 0xE), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029, 0x202F, 0x205F, 0x3000])
_ASCII_WS = "\t\n\x0b\x0c\r "  # what `\s` matches in C++ std::regex (C locale)

# Code points assigned in Unicode 16.0 and 17.0 (the `regex` module's data) but not in 15.1, which llama.cpp's
# unicode-data.cpp was generated from: llama.cpp treats them as undefined (category Cn).
# tools/make_tokenizer_goldens.py --check-unicode recomputes this list from llama.cpp's src/unicode-data.cpp.
_NEWER_THAN_15_1 = """
558 58B-58C 5C8-5C9 88F 897 B53-B54 C5C CDC 1ACF-1AF0 1B4E-1B4F 1B7F 1C89-1C8A 208F 209D-209F 20C1-20C4 2427-2429 2B96 2E60-2E63
31E4-31E5 A7CB-A7CF A7D2 A7D4 A7DA-A7DD A7E2 A7F1 AB6C-AB6D FBC3-FBD2 FD90-FD91 FDC8-FDCE 105C0-105F3 107BB-107BF 10940-10959
10D40-10D65 10D69-10D85 10D8E-10D8F 10EC2-10EC7 10EC9-10ED8 10ED9-10EEE 10EF0-10EFC 11380-11389 1138B 1138E 11390-113B5 113B7-113C0
113C2 113C5 113C7-113CA 113CC-113D5 113D7-113D8 113E1-113E2 116D0-116E3 11B0A 11B60-11B67 11BC0-11BE1 11BF0-11BF9 11DB0-11DDB
11DE0-11DE9 11DF0-11DF1 11F5A 1246F 12475-1247F 12550-12686 13460-143FA 16100-16139 16D40-16D79 16EA0-16EB8 16EBB-16ED3
16FF2-16FF6 187F8-187FF 18CD6-18CDA 18CFF 18D09-18D20 18D80-18DF2 18E00-19191 191A0-191D2 1B123-1B128 1B168 1CC00-1CCFC
1CD00-1CEB3 1CEBA-1CED0 1CED2-1CED4 1CEDD-1CEFD 1D127-1D128 1D1EB-1D1FF 1D250-1D281 1D6A6 1DB00-1DB1C 1DF1F-1DF24 1DF2B-1DF81
1DF90-1DF96 1DFCD-1DFFF 1E5D0-1E5FA 1E5FF 1E6C0-1E6DE 1E6E0-1E6F5 1E6FE-1E6FF 1F1AE 1F6D8-1F6D9 1F777-1F77A 1F7DA-1F7DB
1F7F1-1F7FF 1F8B2-1F8BB 1F8C0-1F8C1 1F8D0-1F8D8 1FA54-1FA57 1FA89-1FA8F 1FABE 1FAC6 1FAC8 1FACC-1FACD 1FADC-1FADD 1FADF
1FAE9-1FAEB 1FAEF 1FAF9-1FAFA 1FBCB-1FBEF 1FBFA 2B73A-2B73F 2B81E 2CEA2-2CEAD 323B0-33479 3D000-3FC3F
"""
def _parse_ranges(s: str) -> tuple[list[int], list[int]]:
  lo, hi = [], []
  for r in s.split():
    a, _, b = r.partition("-")
    lo.append(int(a, 16)); hi.append(int(b or a, 16))
  return lo, hi
_NEW_LO, _NEW_HI = _parse_ranges(_NEWER_THAN_15_1)

def _newer_than_15_1(cp: int) -> bool:
  i = bisect.bisect_right(_NEW_LO, cp) - 1
  return i >= 0 and cp <= _NEW_HI[i]

# the collapsed representation: one byte per category, as in llama.cpp's unicode_regex_split
_CAT_BYTE = (("N", "\xd1"), ("L", "\xd2"), ("P", "\xd3"), ("M", "\xd4"), ("S", "\xd5"))
_CAT_RE = [(regex.compile(rf"\p{{{c}}}"), b) for c, b in _CAT_BYTE]
# the ASCII members of each category, added beside the category byte in collapsed regexes (llama.cpp's k_ucat_map)
_CAT_CLASS = {"N": "\xd10-9", "L": "\xd2A-Za-z", "P": "\xd3!-#%-*,-/:-;?-@\\[-\\]_\\{\\}", "M": "\xd4", "S": "\xd5\\$\\+<->\\^`\\|~"}
_CAT_ALIAS = {"N": "N", "L": "L", "P": "P", "M": "M", "S": "S", "Lu": "L", "Ll": "L", "Lt": "L", "Lm": "L", "Lo": "L"}

class _Collapse(dict):
  """str.translate table: code point -> its collapsed character, filled on first use."""
  def __missing__(self, cp: int) -> str:
    if cp < 128: v = chr(cp)
    elif cp in _WHITESPACE: v = "\x0b"
    elif _newer_than_15_1(cp): v = "\xd0"
    else: v = next((b for r, b in _CAT_RE if r.match(chr(cp))), "\xd0")
    self[cp] = v
    return v
_COLLAPSE = _Collapse()
_WIDE = {cp: "\x0b" for cp in _WHITESPACE if cp >= 128}  # for regexes without \p{..}: only non-ASCII whitespace changes

def _translate(expr: str) -> tuple[re.Pattern, bool]:
  """llama.cpp regex (ECMAScript, as written in llama-vocab.cpp) -> (Python pattern, runs on the collapsed text)."""
  collapsed = "\\p{" in expr
  out, i, inside = [], 0, False
  while i < len(expr):
    c = expr[i]
    if c == "\\":
      n = expr[i + 1]
      if n == "p":
        j = expr.index("}", i)
        body = _CAT_CLASS[_CAT_ALIAS[expr[i + 3:j]]]
        out.append(body if inside else f"[{body}]")
        i = j + 1
        continue
      if n in "sS":
        if inside and n == "S": raise AssertionError(f"\\S in a class is not handled: {expr}")
        out.append(_ASCII_WS.encode("unicode_escape").decode() if inside else ("[" if n == "s" else "[^") + "\\t\\n\\x0b\\x0c\\r ]")
        i += 2
        continue
      out.append(expr[i:i + 2])
      i += 2
      continue
    if c == "[" and not inside:
      inside = True
      out.append(c)
      if expr[i + 1:i + 2] == "^": out.append("^"); i += 1
      if expr[i + 1:i + 2] == "]": raise AssertionError(f"empty class: {expr}")
    elif c == "]" and inside: inside = False; out.append(c)
    elif c == "[" and inside: out.append("\\[")
    elif c == "$" and not inside: out.append("\\Z")  # ECMAScript `$` without multiline: the end of the piece only
    else: out.append(c)
    i += 1
  return re.compile("".join(out)), collapsed

# ---------------------------------------------------------------- pre-tokenizer types (llama-vocab.cpp)

_GPT2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
_LLAMA3 = ("(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}"
           "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
_QWEN2 = _LLAMA3.replace("\\p{N}{1,3}", "\\p{N}")
# non-ASCII characters are written as escapes: several (U+1F7D, U+212A, ...) would not survive Unicode normalization by an editor
_DEEPSEEK_LLM = [
  "[\r\n]",
  "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af\u0370-\u0373\u0376\u0377\u037b-\u037d"
  "\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd"
  "\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57"
  "\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec"
  "\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f"
  "\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-\ua787"
  "\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3"
  "\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943]+",
  "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+",
  "\\s+$",
  "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+",
  "\\p{N}+",
]
_DEEPSEEK_CODER = ["[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+", "\\p{N}"]
_DEEPSEEK_V3 = [
  "\\p{N}{1,3}",
  "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
  "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*"
  "|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
]
_YOUTU = [
  "[\uac00-\ud7a3\u3131-\u318e]+|[\uff01\u2026\u201c\u201d\u2018\u2019\u2014\uff1a\uff1b\uff0c\u3001-\u303f\ufe30-\ufe4f]+|[\u3105-\u312f]+"
  "|[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
  "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
  "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?"
  "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
  "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?"
  "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
]
_DEFAULT = ["[\\p{P}\\$\\+<=>\\^~\\|]+", _GPT2, "\\p{N}+", "[0-9][0-9][0-9]"]

# name -> (regexes, flags that differ from the BPE defaults clean_spaces=True, ignore_merges=False, add_bos=False)
_PRE: dict[str, tuple[list[str], dict]] = {}
def _pre(names: str, exprs: list[str], **flags) -> None:
  for n in names.split(): _PRE[n] = (exprs, flags)
_pre("deepseek-llm", _DEEPSEEK_LLM, clean_spaces=False)
_pre("deepseek-coder", _DEEPSEEK_CODER, clean_spaces=False)
_pre("deepseek-v3", _DEEPSEEK_V3, clean_spaces=False)
_pre("youtu", _YOUTU, clean_spaces=False, ignore_merges=True)
_pre("glm4 glm5", [_LLAMA3], ignore_merges=True, no_default_bos=True)
_pre("chatglm-bpe", [_LLAMA3], no_default_bos=True)
_pre("llama3 llama-v3 llama-bpe falcon3 falcon-h1 pixtral midm-2.0 lfm2 jina-v5-nano", [_LLAMA3], ignore_merges=True, add_bos=True)
_pre("qwen2 deepseek-r1-qwen kormo f2llmv2", [_QWEN2], clean_spaces=False)
_pre("gpt-2 phi-2 jina-es jina-de gigachat jina-v2-es jina-v2-de a.x-4.0 mellum modern-bert exaone4", [_GPT2])
_pre("default", _DEFAULT)
PRE_TYPES = tuple(sorted(_PRE))

_TRAILING_WS = "\\s+$"  # one match per piece: its trailing whitespace run. Done by rstrip: a regex search is quadratic on long runs

_SPLITTERS: dict[str, list[tuple[re.Pattern | None, bool]]] = {}
def _splitter(pre: str) -> list[tuple[re.Pattern | None, bool]]:
  if pre not in _SPLITTERS:
    # llama.cpp's hand-written gpt2 splitter also emits a lone whitespace that the regex leaves as a gap: same pieces
    _SPLITTERS[pre] = [(None, False) if e == _TRAILING_WS else _translate(e + "|\\s+" if e == _GPT2 else e) for e in _PRE[pre][0]]
  return _SPLITTERS[pre]

# ---------------------------------------------------------------- byte-level encoding (GPT-2's bytes_to_unicode)

def _byte_chars() -> list[str]:
  keep = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
  out, n = [""] * 256, 0
  for b in range(256):
    if b in keep: out[b] = chr(b)
    else: out[b], n = chr(256 + n), n + 1
  return out
_BYTE_CHAR = _byte_chars()
_BYTE_ENCODE = {b: c for b, c in enumerate(_BYTE_CHAR)}  # latin-1 code point -> byte-level character
_CHAR_BYTE = {c: b for b, c in enumerate(_BYTE_CHAR)}

# token texts that llama.cpp takes as end-of-turn / FIM markers when the GGUF does not name them, in llama.cpp's order.
# llama.cpp takes the first match in its hash-map order; here the earliest text in the list wins (on the test vocabs
# that is the token llama.cpp picks: <|eot_id|> over <|end_of_text|>, <|im_end|> over <|endoftext|>).
_EOT_TEXTS = ("<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
              "<｜end▁of▁sentence｜>", "<end_of_utterance>")
_EOM_TEXTS = ("<|eom_id|>",)
_FIM_TEXTS = {
  "fim_pre": ("<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>", "<|prefix|>"),
  "fim_suf": ("<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>"),
  "fim_mid": ("<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>", "<|middle|>"),
  "fim_pad": ("<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"),
  "fim_rep": ("<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"),
  "fim_sep": ("<|file_sep|>",),
}
_HARMONY_USER_DEFINED = frozenset({"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"})  # gpt-oss
# texts that always end the generation
_EOG_TEXTS = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>", "<|endoftext|>",
              "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>",
              "<|tool_response>", "<｜end▁of▁sentence｜>", "[e~["}
_SPECIAL_KEYS = {"bos": "bos_token_id", "eos": "eos_token_id", "eot": "eot_token_id", "eom": "eom_token_id", "unk": "unknown_token_id",
                 "sep": "seperator_token_id", "pad": "padding_token_id", "mask": "mask_token_id", "fim_pre": "fim_pre_token_id",
                 "fim_suf": "fim_suf_token_id", "fim_mid": "fim_mid_token_id", "fim_pad": "fim_pad_token_id", "fim_rep": "fim_rep_token_id",
                 "fim_sep": "fim_sep_token_id"}
_SPECIAL_DEPRECATED = {"fim_pre": "prefix_token_id", "fim_suf": "suffix_token_id", "fim_mid": "middle_token_id"}

# ---------------------------------------------------------------- tokenizer

class Tokenizer:
  """Byte-level BPE from a GGUF's tokenizer.ggml.* keys, giving the ids llama.cpp gives.

  encode(text, add_special, parse_special) follows llama_tokenize: add_special adds BOS/EOS as tokenizer.ggml.add_bos_token /
  add_eos_token say; parse_special turns control-token texts in `text` into their ids (user-defined tokens always are).
  decode(ids, skip_special) follows llama_detokenize (skip_special: drop the added BOS/EOS and hide control tokens).
  """
  CACHE_WORDS = 1 << 16  # pre-tokenized words whose ids are kept

  def __init__(self, tokens: list[str], types: list[int] | None, merges: list[str], pre: str, metadata: dict):
    if pre not in _PRE: raise TokenizerError(f"unknown pre-tokenizer type '{pre}' (tokenizer.ggml.pre); supported: {', '.join(PRE_TYPES)}")
    flags = _PRE[pre][1]
    self.pre, self.vocab_size = pre, len(tokens)
    self.split_steps = _splitter(pre)
    self.ignore_merges = flags.get("ignore_merges", False)
    self.clean_spaces = flags.get("clean_spaces", True)
    # the vocabulary's tables built by C-level iteration (zip, map, compress): 150k tokens and 100k merges are in every start
    n = len(tokens)
    self.tokens = list(tokens) if "" not in tokens else [t if t else f"[EMPTY_{i}]" for i, t in enumerate(tokens)]
    self.token_to_id = dict(zip(self.tokens, range(n)))  # later duplicates win, as in llama.cpp
    if types is not None and len(types) < n:
      raise TokenizerError(f"tokenizer.ggml.token_type has {len(types)} entries for {n} tokens")
    self.attr = list(map(_TYPE_ATTR.get, map(int, types[:n]), itertools.repeat(0))) if types is not None else [ATTR_NORMAL] * n
    self.ranks: dict[str, int] = dict(zip(reversed(merges), range(len(merges) - 1, -1, -1)))  # "left right"; the first listing wins
    self._special_ids(metadata, flags)
    self._cache: dict[str, tuple[int, ...]] = {}
    # special tokens, longest text first (llama.cpp's cache_special_tokens)
    spec = list(itertools.compress(range(n), map(operator.and_, self.attr, itertools.repeat(ATTR_CONTROL | ATTR_USER_DEFINED | ATTR_UNKNOWN))))
    self.special_tokens = sorted(spec, key=lambda i: (-len(self.tokens[i].encode()), i))
    self._pieces: dict[int, bytes] = {}  # filled as tokens are decoded: all of a 150k vocabulary up front is 0.2 s of every start

  @classmethod
  def from_gguf(cls, gf) -> "Tokenizer":
    """Build from an apps.gguf.GGUFFile (only its tokenizer.* metadata is used)."""
    name = gf.path.name
    model = gf.get("tokenizer.ggml.model")
    if model is None: raise TokenizerError(f"{name}: no tokenizer.ggml.model key: the file has no tokenizer")
    if model != "gpt2": raise TokenizerError(f"{name}: tokenizer model '{model}' is not supported (only byte-level BPE, 'gpt2')")
    pre = gf.get("tokenizer.ggml.pre")
    if not pre: raise TokenizerError(f"{name}: no tokenizer.ggml.pre key: the pre-tokenizer type is unknown (llama.cpp would guess 'default')")
    tokens, merges = gf.get("tokenizer.ggml.tokens"), gf.get("tokenizer.ggml.merges")
    if not isinstance(tokens, list) or not tokens: raise TokenizerError(f"{name}: tokenizer.ggml.tokens is missing or not a string array")
    if not isinstance(merges, list): raise TokenizerError(f"{name}: tokenizer.ggml.merges is missing or not a string array")
    types = gf.get("tokenizer.ggml.token_type")
    if types is not None and not (hasattr(types, "dtype") and types.dtype.kind in "iu"):
      raise TokenizerError(f"{name}: tokenizer.ggml.token_type is not an integer array")
    try: return cls(tokens, None if types is None else types.tolist(), merges, pre, gf.metadata)
    except TokenizerError as e: raise TokenizerError(f"{name}: {e}") from None

  def _special_ids(self, md: dict, flags: dict) -> None:
    n = self.vocab_size
    ids: dict[str, int | None] = {k: None for k in _SPECIAL_KEYS}
    ids["bos"] = None if flags.get("no_default_bos") else 11  # llama.cpp's defaults for the gpt2 model
    ids["eos"] = 11
    for k in ids:
      if ids[k] is not None and ids[k] >= n: ids[k] = None
    for k, key in [*_SPECIAL_KEYS.items(), *_SPECIAL_DEPRECATED.items()]:
      v = md.get("tokenizer.ggml." + key)
      if isinstance(v, int) and 0 <= v < n: ids[k] = v
    self.add_bos = bool(md.get("tokenizer.ggml.add_bos_token", flags.get("add_bos", False)))
    self.add_eos = bool(md.get("tokenizer.ggml.add_eos_token", False))
    # tokens found by their text when the GGUF does not name them (llama.cpp walks a hash map; here the lowest id wins)
    for k, texts in (("eot", _EOT_TEXTS), ("eom", _EOM_TEXTS), *_FIM_TEXTS.items()):
      if ids[k] is None and (found := [self.token_to_id[t] for t in texts if t in self.token_to_id]):
        ids[k] = found[0]
        self.attr[found[0]] |= ATTR_CONTROL
    eog = {ids[k] for k in ("fim_pad", "fim_rep", "fim_sep") if ids[k] is not None}
    named = _EOG_TEXTS | _HARMONY_USER_DEFINED   # every id with such a text (a vocabulary without duplicates: token_to_id's)
    hits = sorted(self.token_to_id[t] for t in named if t in self.token_to_id) if len(self.token_to_id) == n else \
           [i for i, t in enumerate(self.tokens) if t in named]
    for i in hits:
      if (t := self.tokens[i]) in _EOG_TEXTS:
        eog.add(i)
        self.attr[i] |= ATTR_CONTROL
      if t in _HARMONY_USER_DEFINED: self.attr[i] = ATTR_USER_DEFINED
    eog |= {ids[k] for k in ("eos", "eot", "eom") if ids[k] is not None}
    texts = {self.tokens[i]: i for i in eog}
    if "<|end|>" in texts and (("<|return|>" in texts and "<|call|>" in texts) or ("<|calls|>" in texts and "<|flush|>" in texts)):
      eog.discard(texts["<|end|>"])  # o200k_harmony / solar-open: <|end|> ends a message, not the generation
      self.attr[texts["<|end|>"]] = ATTR_USER_DEFINED
    if "</s>" in texts and ("<|tool_response>" in texts or "<|plamo:eos|>" in texts):
      eog.discard(texts["</s>"])
      self.attr[texts["</s>"]] = ATTR_NORMAL
    self.special = ids
    self.bos_id, self.eos_id, self.eot_id, self.eom_id = ids["bos"], ids["eos"], ids["eot"], ids["eom"]
    self.eog_ids = frozenset(eog)

  def is_eog(self, token_id: int) -> bool:
    """End of generation: EOS, EOT, EOM and the other tokens llama.cpp stops on."""
    return token_id in self.eog_ids

  # ---- encode
  def split(self, text: str) -> list[str]:
    """Pre-tokenize `text` (no special tokens) into the words BPE runs on."""
    if not text: return []
    spans = [(0, len(text))]
    wide = collapsed = None
    for pat, on_collapsed in self.split_steps:
      if on_collapsed:
        if collapsed is None: collapsed = text.translate(_COLLAPSE)
        src = collapsed
      else:
        if wide is None: wide = text.translate(_WIDE)
        src = wide
      out = []
      if pat is None:
        for s, e in spans:
          j = s + len(src[s:e].rstrip(_ASCII_WS))
          out.extend(p for p in ((s, j), (j, e)) if p[0] < p[1])
        spans = out
        continue
      for s, e in spans:
        pos = s
        for m in pat.finditer(src, s, e):
          a, b = m.span()
          if a > pos: out.append((pos, a))
          out.append((a, b))
          pos = b
        if pos < e: out.append((pos, e))
      spans = out
    return [text[s:e] for s, e in spans]

  def _bpe(self, word: str) -> tuple[int, ...]:
    enc = word.encode("utf-8", "surrogatepass").decode("latin-1").translate(_BYTE_ENCODE)
    if self.ignore_merges and enc in self.token_to_id: return (self.token_to_id[enc],)
    syms = list(enc)
    n, ranks = len(syms), self.ranks
    nxt, prv = list(range(1, n + 1)), list(range(-1, n - 1))
    nxt[-1] = -1
    heap = []
    for i in range(n - 1):
      r = ranks.get(syms[i] + " " + syms[i + 1])
      if r is not None: heap.append((r, i, i + 1, syms[i] + syms[i + 1]))
    heapq.heapify(heap)
    while heap:
      _, l, r, text = heapq.heappop(heap)
      if not syms[l] or not syms[r] or syms[l] + syms[r] != text: continue  # stale: one side has changed since
      syms[l], syms[r] = text, ""
      nxt[l] = nxt[r]
      if nxt[r] >= 0: prv[nxt[r]] = l
      for a, b in ((prv[l], l), (l, nxt[l])):
        if a >= 0 and b >= 0 and (rk := ranks.get(syms[a] + " " + syms[b])) is not None: heapq.heappush(heap, (rk, a, b, syms[a] + syms[b]))
    out = []
    for s in syms:
      if not s: continue
      tid = self.token_to_id.get(s)
      if tid is not None: out.append(tid)
      else:  # llama.cpp looks each byte of the symbol's UTF-8 up as a one-byte text; only ASCII can ever match
        out.extend(self.token_to_id[chr(b)] for b in s.encode() if b < 0x80 and chr(b) in self.token_to_id)
    return tuple(out)

  def encode_text(self, text: str) -> list[int]:
    """Ids of plain text: no special-token parsing, no BOS/EOS."""
    out, cache = [], self._cache
    for w in self.split(text):
      ids = cache.get(w)
      if ids is None:
        ids = self._bpe(w)
        if len(cache) >= self.CACHE_WORDS: cache.clear()
        cache[w] = ids
      out.extend(ids)
    return out

  def partition(self, text: str, parse_special: bool = False) -> list[str | int]:
    """Split off special-token texts (longest first, as llama.cpp's tokenizer_st_partition): a list of text pieces and ids."""
    frags: list[str | int] = [text]
    for tid in self.special_tokens:
      if not parse_special and self.attr[tid] & (ATTR_CONTROL | ATTR_UNKNOWN): continue
      t = self.tokens[tid]
      if not any(isinstance(f, str) and t in f for f in frags): continue
      out: list[str | int] = []
      for f in frags:
        if isinstance(f, int) or t not in f: out.append(f); continue
        parts = f.split(t)
        for j, p in enumerate(parts):
          if j: out.append(tid)
          if p: out.append(p)
      frags = out
    return frags

  def encode(self, text: str, add_special: bool = True, parse_special: bool = False) -> list[int]:
    """Token ids of `text`, as llama_tokenize(text, add_special, parse_special) gives them."""
    if not isinstance(text, str): raise TokenizerError(f"encode() takes a str, not {type(text).__name__}")
    out: list[int] = []
    if add_special and self.add_bos:
      if self.bos_id is None: raise TokenizerError("tokenizer.ggml.add_bos_token is set but the vocab has no BOS token")
      out.append(self.bos_id)
    for f in self.partition(text, parse_special) if text else []:
      if isinstance(f, int): out.append(f)
      else: out.extend(self.encode_text(f))
    if add_special and self.add_eos:
      if self.eos_id is None: raise TokenizerError("tokenizer.ggml.add_eos_token is set but the vocab has no EOS token")
      out.append(self.eos_id)
    return out

  # ---- decode
  def _piece(self, i: int) -> bytes:
    a, t = self.attr[i], self.tokens[i]
    if a & (ATTR_UNKNOWN | ATTR_CONTROL | ATTR_USER_DEFINED): return t.encode("utf-8")
    if a & ATTR_NORMAL:
      try: return bytes(_CHAR_BYTE[c] for c in t)
      except KeyError: pass
      out = bytearray()
      for c in t:  # llama_decode_text: a character outside the byte alphabet is spelled out
        if c in _CHAR_BYTE: out.append(_CHAR_BYTE[c])
        else: out += b"[UNK_BYTE_0x" + c.encode().hex().encode() + t.encode() + b"]"
      return bytes(out)
    if a & ATTR_BYTE:
      try: return bytes([int(t[3:5], 16)])
      except ValueError: return b""
    return b""

  def _check(self, token_id) -> int:
    try: tid = operator.index(token_id)
    except TypeError: raise TokenizerError(f"token id {token_id!r} is not an integer") from None
    if not 0 <= tid < self.vocab_size: raise TokenizerError(f"token id {tid} is out of range [0, {self.vocab_size})")
    return tid

  def token_to_bytes(self, token_id: int) -> bytes:
    """The bytes token `token_id` stands for (control tokens as their text), llama_token_to_piece(special=True)."""
    return self._piece_of(self._check(token_id))

  def _piece_of(self, tid: int) -> bytes:
    if (p := self._pieces.get(tid)) is None: p = self._pieces[tid] = self._piece(tid)
    return p

  def piece(self, token_id: int, special: bool = True) -> bytes:
    """llama_token_to_piece: with special=False, control and unknown tokens give b''."""
    tid = self._check(token_id)
    if not special and self.attr[tid] & (ATTR_CONTROL | ATTR_UNKNOWN): return b""
    return self._piece_of(tid)

  def decode_bytes(self, ids: Iterable[int], skip_special: bool = False) -> bytes:
    """llama_detokenize(remove_special=skip_special, unparse_special=not skip_special), as bytes."""
    ids = [self._check(i) for i in ids]
    if skip_special and self.add_bos and ids and ids[0] == self.bos_id: ids = ids[1:]
    if skip_special and self.add_eos and ids and ids[-1] == self.eos_id: ids = ids[:-1]
    text = b"".join(self.piece(i, not skip_special) for i in ids)
    return _clean_spaces(text) if self.clean_spaces else text

  def decode(self, ids: Iterable[int], skip_special: bool = False) -> str:
    """Text of `ids` (invalid UTF-8 becomes U+FFFD)."""
    return self.decode_bytes(ids, skip_special).decode("utf-8", "replace")

def _clean_spaces(text: bytes) -> bytes:
  """llama_detokenize's clean_up_tokenization_spaces, three in-place passes over one buffer exactly as llama.cpp runs them:
  ' ?' ' !' ' .' ' ,' lose the space; " ' " loses both spaces; " 's" " 'm" " 're" " 've" lose the space."""
  b, n = bytearray(text), len(text)
  total = 1 if n else 0
  for i in range(1, n):
    x = b[i]
    if b[i - 1] == 0x20 and x in b"?!.,": total -= 1
    b[total] = x
    total += 1
  n, total, i = total, 1 if total else 0, 1
  while i < n:
    x = b[i]
    if x == 0x27 and i + 1 < n and b[i - 1] == 0x20 and b[i + 1] == 0x20:
      total -= 1
      i += 1
      b[i] = 0  # llama.cpp blanks the skipped space in place; a later look-behind sees the NUL
    b[total] = x
    total += 1
    i += 1
  n, total = total, 1 if total else 0
  for i in range(1, n):
    x = b[i]
    if b[i - 1] == 0x20 and x == 0x27 and i + 1 < n:
      x1 = b[i + 1]
      if x1 in b"sm" or (x1 in b"rv" and i + 2 < n and b[i + 2] == 0x65): total -= 1
    b[total] = x
    total += 1
  return bytes(b[:total])

class StreamDecoder:
  """Incremental detokenizer: add(id) returns the text completed so far; partial UTF-8 is held back until it completes.

  Pieces are llama_token_to_piece's (what llama.cpp's server streams): control tokens show only with special=True,
  and no clean-up of spaces is applied.
  """
  def __init__(self, tok: Tokenizer, special: bool = False):
    self.tok, self.special = tok, special
    self._dec = codecs.getincrementaldecoder("utf-8")("replace")

  def add(self, token_id: int) -> str:
    return self._dec.decode(self.tok.piece(token_id, self.special))

  def flush(self) -> str:
    """The rest: a dangling incomplete sequence comes out as U+FFFD. The decoder is ready for reuse afterwards."""
    out = self._dec.decode(b"", final=True)
    self._dec.reset()
    return out
