"""Regenerate test/goldens/tokenizer_<pre>.json: llama.cpp's token ids for a few hundred varied strings, per pre-tokenizer type.

llama.cpp ships test vocabularies for only some pre types, so the others are checked on llama.cpp's
models/ggml-vocab-deepseek-llm.gguf with tokenizer.ggml.pre rewritten (every other key and value type copied exactly):
llama-cpp-python (the reference, `pip install -r requirements-ref.txt`) loads each copy vocab-only and tokenizes the
strings from `golden_strings()`, a deterministic generator covering Unicode categories, digit runs of 1-12, whitespace
runs with \\n \\r \\t, emoji with ZWJ, CJK, Korean, Arabic, indented code, contractions, special-token look-alikes and
very long words.

  ./run python -m tools.make_tokenizer_goldens                 # rewrite the goldens
  ./run python -m tools.make_tokenizer_goldens --check         # compare apps/tokenizer.py with llama.cpp live, write nothing
  ./run python -m tools.make_tokenizer_goldens --check-unicode PATH/TO/llama.cpp/src/unicode-data.cpp
      # verify apps.tokenizer's Unicode categories (regex module + the post-15.1 list) against llama.cpp's table
"""
from __future__ import annotations
import argparse, contextlib, json, os, random, sys, tempfile
from pathlib import Path
import apps  # noqa: F401
from apps.gguf import GGUFFile, GGUFWriter, ValueType
from apps.vocab import vocab_file

GOLDENS = Path(__file__).resolve().parent.parent / "test" / "goldens"
PRE_TYPES = ("deepseek-llm", "deepseek-v3", "glm4", "youtu")  # goldens; the pre types with their own llama.cpp vocab use its .inp/.out
CHECK_ALSO = ("deepseek-coder", "qwen2", "llama-bpe", "gpt-2")  # --check covers these too
VOCAB = "deepseek-llm"
SEED = 20240607

def with_pre(src: str | Path, dst: str | Path, pre: str) -> Path:
  """Copy a tensor-less GGUF (a vocab file) with tokenizer.ggml.pre set to `pre`; every other key keeps its value type."""
  gf = GGUFFile(src)
  if gf.tensors: raise ValueError(f"{src} has tensors; only vocab files are copied")
  w = GGUFWriter(dst, alignment=gf.alignment)
  for key, value in gf.metadata.items():
    vt = gf.value_types[key]
    if key == "general.alignment": continue  # GGUFWriter writes it from `alignment`
    if key == "tokenizer.ggml.pre": w.add(key, pre, ValueType.STRING)
    elif isinstance(vt, tuple): w.add_array(key, value, vt[1])
    else: w.add(key, value, vt)
  if "tokenizer.ggml.pre" not in gf.metadata: w.add("tokenizer.ggml.pre", pre, ValueType.STRING)
  gf.close()
  w.write(lambda name: b"")
  return Path(dst)

# ---------------------------------------------------------------- strings

FIXED = [
  "", " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\r", " \n \n ", "\t\n", "a", "a ", " a", "a  b", "a \n b", "a\n\n\nb", "a \t b",
  "Hello world", " Hello World!", "Hello, world!", "HELLO WORLD", "hello\tworld", "  leading", "trailing  ", "mid   dle",
  "I'm", "you're", "they've", "he'd", "we'll", "it's", "IT'S", "YOU'RE", "'s", "'S", "'ll", "don't", "O'Neil", "'", "''", "' '", "a ' b",
  "rock 'n' roll", "'tis", "Jones's", " 's", "x'", "'re'", "they'RE", "We'Ll",
  "1", "12", "123", "1234", "12345", "123456789012", "3.14159", "1,000,000", "1 000 000", "v1.2.3", "0x1F", "-42", "+7e10", "2024-06-07",
  "\u0663\u0664\u0665", "\u00bd", "\u216b", "\u00b2\u00b3", "\u2460\u2461", "\uff11\uff12\uff13", "\u0967\u0968", "12\u00bd", "a1b2c3",
  "\U0001f44d", "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466", "\U0001f3f3\ufe0f\u200d\U0001f308", "\U0001f1fa\U0001f1f8",
  "\U0001f44b\U0001f3fd", "I \u2764\ufe0f NY", "\U0001f600\U0001f603\U0001f604", "\u2615 coffee", "\U0001f999.cpp", "\u00a9 \u00ae \u2122",
  "\u4f60\u597d\uff0c\u4e16\u754c\uff01", "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8", "\u30ab\u30bf\u30ab\u30ca", "\u3072\u3089\u304c\u306a",
  "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8", "\u3131\u3134\u3137", "\u3105\u3106\u3107",
  "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645",
  "\u05e9\u05dc\u05d5\u05dd", "\u0928\u092e\u0938\u094d\u0924\u0947", "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35",
  "\u039a\u03b1\u03bb\u03b7\u03bc\u03ad\u03c1\u03b1",
  "\u041f\u0440\u0438\u0432\u0435\u0442 \u043c\u0438\u0440", "caf\u00e9 na\u00efve \u00c5ngstr\u00f6m", "e\u0301", "\u2126mega \u212aelvin \u212b",
  "\uff21\uff22\uff23\uff11\uff12\uff13\uff01", "\u3000", "a\u3000b", "a\u00a0b", "\u2003em", "x\u0085y", "\u200b", "\ufeffBOM", "\u2028\u2029",
  "\x00\x01\x1f", "\x1c\x1d\x1e", "\x7f", "\ue000", "\U0001fa89", "\u1c89", "\u31e4", "\U0001f6d8", "\u1f7d\u1fbe\u1fd3", "\u00b5s",
  "\u3001\u3002\u300c\u300d", "\u201c\u201d\u2018\u2019\u2014\u2026", "\ufe30\ufe4f", "\uff01\uff1a\uff1b\uff0c", "\u0800\u4e00",
  "\u1100\u1161", "\uac00\ud7a3\ud7a4", "\u3131\u318e\u318f",
  # code points assigned after Unicode 15.1 (undefined for llama.cpp); after a space, deepseek-v3's ids depend on it
  "x\u1c89y", "!\U0001fa89!", "12\U00016d7034", "\u0628\u0897\u0628", "A\U000105c0B", "\u20c1$", " \U0001fa89 ", " \U0001fac8a", " \u2427!",
  "def f(x):\n    return x**2  # square\n\n\tif x: pass\n", "for (int i = 0; i < n; ++i) {\n  a[i] = b[i] * 2;\n}",
  '{"key": [1, 2.5, null], "k2": {"n": "v"}}', '<div class="x">&amp;</div>', "https://example.com/path?q=1&r=2#frag", "user@example.org",
  "## Title\n- item\n\n```py\nprint(1)\n```\n", "if (a && b || !c) { return -1; }", "x += 1; y -= 2; z *= 3;", "    indented\n        more",
  "$ ls -la | grep foo > out.txt 2>&1", "SELECT * FROM t WHERE a = 'b';", "a\\b\\c", "/usr/local/bin", "C:\\Windows\\System32",
  "<\uff5cbegin\u2581of\u2581sentence\uff5c>", "<\uff5cend\u2581of\u2581sentence\uff5c>", "<|endoftext|>", "<|im_start|>user\nhi<|im_end|>",
  "[gMASK]<sop><|user|>hi<|assistant|>", "<think>\nhmm\n</think>", "</s><s>", "User: hi\n\nAssistant:", "<|User|>x<|Assistant|>",
  "a" * 300, "supercalifragilisticexpialidocious" * 5, "\u4e2d" * 200, "!" * 100, " " * 64 + "x", "\n" * 20, "ab" * 150, "9" * 40,
  "Pneumonoultramicroscopicsilicovolcanoconiosis",
  "\u0414\u043e\u0441\u0442\u043e\u043f\u0440\u0438\u043c\u0435\u0447\u0430\u0442\u0435\u043b\u044c\u043d\u043e\u0441\u0442\u0438",
]

ATOMS = {
  "latin": ["the", "The", "QUICK", "brown", "fox", "jumps", "over", "lazy", "dog", "caf\u00e9", "na\u00efve", "stra\u00dfe", "\u00c5sa", "x", "Zz"],
  "cyrillic": ["\u043f\u0440\u0438\u0432\u0435\u0442", "\u041c\u043e\u0441\u043a\u0432\u0430", "\u0451\u0436"],
  "greek": ["\u03b1\u03b2\u03b3", "\u0394\u03b5\u03bb\u03c4\u03b1", "\u1f7d\u1f00"],
  "cjk": ["\u4e2d\u6587", "\u6c49\u5b57", "\u9f98", "\u3400", "\U00020000", "\u65e5\u672c", "\u3072\u3089", "\u30ab\u30bf", "\u30fc"],
  "korean": ["\ud55c\uad6d", "\uc548\ub155\ud558\uc138\uc694", "\u3131\u314f", "\u1100"],
  "arabic": ["\u0645\u0631\u062d\u0628\u0627", "\u0627\u0644\u0639\u0631\u0628\u064a\u0629", "\u064b"],
  "indic": ["\u0928\u092e\u0938\u094d\u0924\u0947", "\u0939\u093f\u0928\u094d\u0926\u0940", "\u0ba4\u0bae\u0bbf\u0bb4\u0bcd"],
  "thai": ["\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35", "\u0e20\u0e32\u0e29\u0e32"],
  "emoji": ["\U0001f600", "\U0001f44d\U0001f3fb", "\U0001f468\u200d\U0001f4bb", "\u2764\ufe0f", "\U0001f1ef\U0001f1f5",
            "\U0001f937\u200d\u2640\ufe0f", "\u2b50"],
  "punct": [".", ",", "!", "?", "...", "--", "\u2014", "\u2026", "(", ")", "[", "]", "{", "}", "\"", "'", "`", "\u00bf", "\u00a1", "\u3002",
            "\uff0c", "\u300a", "\u300b"],
  "symbol": ["$", "+", "<", "=", ">", "^", "|", "~", "\u20ac", "\u00a3", "\u00a7", "\u00b0", "\u2192", "\u2211", "\u221e", "\u00ae", "\u2122"],
  "contraction": ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ve", "'M", "'LL", "'D"],
  "code": ["def", "return", "x_1", "__init__", "self.w", "a->b", "i++", "&&", "||", "==", "!=", "<=", "=>", "::", "/*", "*/", "#include", "0xFF"],
  "special": ["<|endoftext|>", "<\uff5cend\u2581of\u2581sentence\uff5c>", "<think>", "</think>", "[gMASK]", "<sop>", "<|user|>", "<s>"],
}
WHITESPACE = [" ", " ", " ", "  ", "\n", "\t", "\r\n", " \n", "\n\n", "   ", "\t\t", "\u00a0", "\u3000", " \t ", "\r", "\n \n", "\u2009"]

def _digits(r: random.Random) -> str:
  return "".join(r.choice("0123456789") for _ in range(r.randint(1, 12)))

def _soup(r: random.Random) -> str:
  """Random code points from blocks of every general category (assigned by Unicode 15.1, plus a few newer ones)."""
  blocks = [(0x20, 0x7e), (0xa0, 0x24f), (0x300, 0x36f), (0x370, 0x52f), (0x591, 0x6ff), (0x900, 0x97f), (0xe00, 0xe5b), (0x1e00, 0x1fff),
            (0x2000, 0x206f), (0x2070, 0x218b), (0x2190, 0x23ff), (0x2460, 0x24ff), (0x2e80, 0x2fd5), (0x3000, 0x30ff), (0x3100, 0x318f),
            (0x4e00, 0x9fff), (0xac00, 0xd7a3), (0xfe30, 0xfe4f), (0xff00, 0xffef), (0x1f300, 0x1faff), (0x10400, 0x1044f), (0x1e900, 0x1e95f)]
  out = []
  for _ in range(r.randint(1, 24)):
    lo, hi = r.choice(blocks)
    out.append(chr(r.randint(lo, hi)))
  return "".join(out)

def golden_strings(n_random: int = 240, seed: int = SEED) -> list[str]:
  """The fixed edge cases plus `n_random` deterministic random mixes of words, digits, whitespace, emoji and code points."""
  r = random.Random(seed)
  out = list(FIXED)
  kinds = list(ATOMS)
  for i in range(n_random):
    parts = []
    for _ in range(r.randint(1, 12)):
      k = r.random()
      if k < 0.55: parts.append(r.choice(ATOMS[r.choice(kinds)]))
      elif k < 0.65: parts.append(_digits(r))
      elif k < 0.75: parts.append(_soup(r))
      else: parts.append(r.choice(WHITESPACE))
      if r.random() < 0.6: parts.append(r.choice(WHITESPACE))
    s = "".join(parts)
    if i % 17 == 0: s = " " * r.randint(1, 6) + s
    if i % 13 == 0: s += r.choice(WHITESPACE) * r.randint(1, 4)
    out.append(s)
  return out

def special_strings(tokens: list[str], types: list[int]) -> list[str]:
  """Strings mixing the vocab's control and user-defined token texts with text, for parse_special=True."""
  spec = [t for t, ty in zip(tokens, types) if ty in (3, 4)][:12]
  r = random.Random(SEED + 1)
  out = [s for s in spec]
  for _ in range(24):
    out.append("".join(r.choice(spec + ["hello", " world", "\n", "  ", "\u4f60\u597d", "12345", "<", "|>"]) for _ in range(r.randint(1, 6))))
  return out

def merge_strings(n: int = 48) -> list[str]:
  """Words of llama.cpp's llama-bpe vocab that are tokens but that BPE merges would split (so ignore_merges shows), and a few mixes."""
  from apps.tokenizer import Tokenizer, _CHAR_BYTE
  gf = GGUFFile(vocab_file("llama-bpe"))
  md = gf.metadata
  tok = Tokenizer(md["tokenizer.ggml.tokens"], md["tokenizer.ggml.token_type"].tolist(), md["tokenizer.ggml.merges"], "gpt-2", md)
  words = []
  for i, t in enumerate(tok.tokens):
    try: w = bytes(_CHAR_BYTE[c] for c in t).decode()
    except (KeyError, UnicodeDecodeError): continue
    if w.startswith(" ") and w[1:].isalpha() and len(tok.split(w)) == 1 and tok.encode_text(w) != [i]: words.append(w)
  words = words[::max(1, len(words) // n)][:n]
  return words + ["".join(words[i:i + 3]) for i in range(0, 12, 3)] + golden_strings(12, SEED + 3)[-12:]

# ---------------------------------------------------------------- reference

def llama_ids(model, text: str, add_special: bool, parse_special: bool) -> list[int]:
  return model.tokenize(text.encode("utf-8", "surrogatepass"), add_bos=add_special, special=parse_special)

@contextlib.contextmanager
def quiet():
  """Silence llama.cpp's own stderr logging (e.g. its double-BOS warning) at the file-descriptor level."""
  sys.stderr.flush()
  saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
  os.dup2(null, 2)
  try: yield
  finally:
    os.dup2(saved, 2)
    os.close(saved); os.close(null)

def load_llama(path: Path):
  import llama_cpp
  return llama_cpp.Llama(str(path), vocab_only=True, verbose=False)

def generate(pre: str, workdir: Path) -> dict:
  src = vocab_file(VOCAB)
  path = with_pre(src, workdir / f"vocab-{pre}.gguf", pre)
  with quiet(): model = load_llama(path)
  gf = GGUFFile(src)
  tokens, types = gf.metadata["tokenizer.ggml.tokens"], gf.metadata["tokenizer.ggml.token_type"].tolist()
  with quiet():
    cases = [[s, llama_ids(model, s, False, False)] for s in golden_strings()]
    special = [[s, llama_ids(model, s, True, True)] for s in special_strings(tokens, types)]
    bpe_model = load_llama(with_pre(vocab_file("llama-bpe"), workdir / f"llama-bpe-{pre}.gguf", pre))
    merges = [[s, llama_ids(bpe_model, s, False, False)] for s in merge_strings()]
  import llama_cpp
  return {"about": f"llama.cpp token ids (llama-cpp-python {llama_cpp.__version__}) on ggml-vocab-{VOCAB}.gguf with tokenizer.ggml.pre='{pre}';"
                   " regenerate with python3 -m tools.make_tokenizer_goldens",
          "vocab": VOCAB, "pre": pre, "cases": cases, "special_cases": special,
          "llama_bpe_about": "ids on ggml-vocab-llama-bpe.gguf with the same pre type: words whose vocab token BPE merges would not build",
          "llama_bpe_cases": merges}

def check_live(pre: str, workdir: Path) -> int:
  from apps.tokenizer import Tokenizer
  src = vocab_file(VOCAB)
  path = with_pre(src, workdir / f"vocab-{pre}.gguf", pre)
  with quiet(): model = load_llama(path)
  tok = Tokenizer.from_gguf(GGUFFile(path))
  bad = 0
  for s in golden_strings(1000, SEED + 7):
    with quiet(): b = llama_ids(model, s, False, False)
    a = tok.encode(s, add_special=False)
    if a != b:
      bad += 1
      if bad <= 5: print(f"  {pre}: {s!r}\n    ours  {a}\n    llama {b}")
  print(f"{pre}: {bad} mismatches")
  return bad

def check_unicode(path: str) -> int:
  """Compare apps.tokenizer's per-code-point category with llama.cpp's unicode_ranges_flags table."""
  import re
  from apps.tokenizer import _COLLAPSE
  text = Path(path).read_text()
  body = text[text.index("unicode_ranges_flags"):]
  body = body[:body.index("};")]
  starts = [(int(a, 16), int(b, 16)) for a, b in re.findall(r"\{0x([0-9A-Fa-f]+), 0x([0-9A-Fa-f]+)\}", body)]
  ws = set(int(x, 16) for x in re.findall(r"0x([0-9A-Fa-f]+)", text[text.index("unicode_set_whitespace"):].split("};")[0]))
  byte_of = {0x2: "\xd1", 0x4: "\xd2", 0x20: "\xd3", 0x10: "\xd4", 0x40: "\xd5"}
  bad = 0
  for (lo, flags), (hi, _) in zip(starts, starts[1:]):
    for cp in range(max(lo, 128), hi):
      want = "\x0b" if cp in ws else byte_of.get(flags, "\xd0")
      if _COLLAPSE[cp] != want:
        bad += 1
        if bad <= 10: print(f"U+{cp:04X}: ours {_COLLAPSE[cp]!r} llama.cpp {want!r}")
  print(f"unicode: {bad} code points differ")
  return bad

def main() -> None:
  ap = argparse.ArgumentParser(prog="python3 -m tools.make_tokenizer_goldens", description=__doc__.split("\n")[0])
  ap.add_argument("--check", action="store_true", help="compare with llama.cpp live instead of writing goldens")
  ap.add_argument("--check-unicode", metavar="UNICODE_DATA_CPP", help="verify the Unicode categories against llama.cpp's table")
  ap.add_argument("--pre", nargs="*", default=list(PRE_TYPES))
  args = ap.parse_args()
  if args.check_unicode: sys.exit(1 if check_unicode(args.check_unicode) else 0)
  with tempfile.TemporaryDirectory() as d:
    if args.check: sys.exit(1 if sum(check_live(p, Path(d)) for p in (*args.pre, *CHECK_ALSO)) else 0)
    for pre in args.pre:
      g = generate(pre, Path(d))
      out = GOLDENS / f"tokenizer_{pre}.json"
      out.write_text(json.dumps(g, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
      print(f"wrote {out} ({out.stat().st_size // 1024} KB, {len(g['cases'])} + {len(g['special_cases'])} cases)")

if __name__ == "__main__":
  main()
