#!/usr/bin/env python3
"""gen_tokenizer_fixtures.py — regenerate the tokenizer and chat-template fixtures.

Reference tokenizer: llama.cpp through llama-cpp-python (Llama(model_path, vocab_only=True),
.tokenize(bytes, add_bos=False, special=...)). When llama_cpp is not importable, Hugging Face
`tokenizers` is used instead, with a tokenizer rebuilt from the GGUF metadata (byte-level BPE,
Digits(individual) + ByteLevel pre-tokenizer: SmolLM2's tokenizer.json). When both are present
the script also checks that they agree and reports differences.

Chat references: the models' own Jinja templates rendered with jinja2 (SmolLM2's from the GGUF,
Llama-3's and Mistral-v0.1's written below from their public tokenizer_config.json), with
bos_token = "" (the tokenizer adds BOS) — and, where a template cannot render a case (Mistral
with a system message), llama.cpp's built-in formatter via llama_chat_apply_template.

Outputs (plain text, read by tests/test_tokenizer.c and tests/test_chat.c):
  tests/fixtures/tokenizer/smollm2.tok   one case per line: "P|S <TAB> hex(input) <TAB> ids"
                                         (S = parse_special on, P = off; ids space-separated)
  tests/fixtures/tokenizer/smollm2-pre-<pre>.tok   the same corpus with SmolLM2's vocabulary
                                         but tokenizer.ggml.pre = llama-bpe / qwen2 (Llama-3
                                         and Qwen2 split rules; llama.cpp only)
  tests/fixtures/tokenizer/chat.txt      chat cases, see write_chat()
  tests/fixtures/tokenizer/template_*.jinja   template strings for detection tests

--preset qwen: the second reference model, Qwen2.5-Coder-1.5B-Instruct (qwen2 pre-tokenizer,
151,936 tokens; models/Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf from scripts/get-model-qwen.sh),
on the same corpus, written to
  tests/fixtures/tokenizer/qwen25coder.tok   same format as smollm2.tok (read by
                                         tests/test_qwen_logits_slow.c)
and nothing else. Its Hugging Face reference is transformers' own GGUF tokenizer
(AutoTokenizer.from_pretrained(dir, gguf_file=...): Qwen2Tokenizer with the qwen2 split regex,
no normalizer), with split_special_tokens=True for the P cases; llama.cpp as above when it is
importable (and the two are cross-checked).

Usage: python3 scripts/gen_tokenizer_fixtures.py [--preset smollm2|qwen] [--model PATH]
"""
import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "tokenizer")

# Per model: the GGUF under models/, the fixture file, the Hugging Face reference ("rebuilt":
# a tokenizers.Tokenizer rebuilt from the GGUF metadata with SmolLM2's pre-tokenizer;
# "transformers": transformers' GGUF tokenizer), and whether the pre-tokenizer variants and
# the chat fixtures (SmolLM2 only) are written too.
PRESETS = {
    "smollm2": {"model": "SmolLM2-135M-Instruct.Q4_1.gguf", "tok": "smollm2.tok",
                "hf": "rebuilt", "extras": True},
    "qwen": {"model": "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf", "tok": "qwen25coder.tok",
             "hf": "transformers", "extras": False},
}


# ---- corpus ---------------------------------------------------------------------------------

def corpus():
    c = []
    # plain English and sentence shapes
    c += [
        "Hello world!",
        "Hello, world! How are you today?",
        "The quick brown fox jumps over the lazy dog.",
        "hello",
        " hello",
        "  hello",
        "hello ",
        "Hello",
        "HELLO",
        "HeLLo WoRLD",
        "a",
        " ",
        "A",
        "This is a test.\nThis is only a test.",
        "Once upon a time, there was a tokenizer that split text into pieces.",
        "camelCaseIdentifier snake_case_identifier SCREAMING_SNAKE kebab-case-word",
        "e-mail: someone@example.com, web: https://example.org/path?q=1&r=two#frag",
        "/usr/local/bin/python3 --version > /dev/null 2>&1",
        "C:\\Windows\\System32\\drivers\\etc\\hosts",
        "Mr. O'Neil's dog — an über-cool café owner's pet — isn't here.",
    ]
    # contractions, lower and upper case, and curly apostrophes
    for w in ["I'm", "you're", "it's", "we've", "they'll", "he'd", "don't", "can't", "won't"]:
        c.append(w)
        c.append(w.upper())
    c += [
        "'s 't 're 've 'm 'll 'd",
        "'S 'T 'RE 'VE 'M 'LL 'D",
        "rock'n'roll isn't 'quoted' ''double'' '''triple'''",
        "It’s a curly apostrophe ’s and ‘quotes’",
        "'",
        "'''",
        "John's book's cover's color",
    ]
    # numbers of many lengths (the split rules group digits)
    for k in range(1, 21):
        c.append("".join(str((i * 7 + 3) % 10) for i in range(k)))
    c += [
        "3.14159265358979", "1,000,000", "-42", "+7", "1e10", "6.02e23", "0x1F 0xDEADBEEF",
        "2024-11-22T10:30:00Z", "Call 555-0123 or (555) 012-3456", "v1.2.3-rc4",
        " 123 456 7890", "abc123def456", "x1 y22 z333 w4444",
        "१२३४५ ٣٤٥ ① ½ ² Ⅻ", "１２３ full-width digits",
    ]
    # whitespace runs 1..20 of spaces, tabs, newlines; mixed
    for k in [1, 2, 3, 4, 5, 7, 8, 12, 16, 20]:
        c.append(" " * k)
        c.append("\t" * k)
        c.append("\n" * k)
        c.append("a" + " " * k + "b")
    c += [
        "a\tb\tc", "a\nb\nc", "a\r\nb\r\n", "line1\n\nline3\n\n\n", "  leading", "trailing  ",
        " \n \t \r\n  ", "\n \n", "word\n    indented\n\tTabbed", "a \n b", "end.\n",
        "\u00a0nbsp\u00a0here", "ideographic\u3000space", "line\u2028sep", "next\u0085line",
        "zero\u200bwidth", "\ufeffbom at start", "\x0bvt\x0cff",
    ]
    # scripts
    c += [
        "你好，世界！今天天气很好。",
        "我爱自然语言处理和大型语言模型。",
        "こんにちは世界、カタカナとひらがなと漢字。",
        "東京都渋谷区",
        "안녕하세요 세계! 한국어 문장입니다.",
        "مرحبا بالعالم، هذه جملة باللغة العربية.",
        "שלום עולם, זה משפט בעברית.",
        "नमस्ते दुनिया, यह हिंदी में एक वाक्य है।",
        "สวัสดีชาวโลก ภาษาไทยไม่มีช่องว่าง",
        "Привет, мир! Это предложение на русском языке.",
        "Γειά σου κόσμε! Ελληνικά γράμματα αβγδ.",
        "Բարեւ աշխարհ",
        "გამარჯობა მსოფლიო",
        "வணக்கம் உலகம்",
        "ওহে বিশ্ব",
        "Xin chào thế giới, tiếng Việt có dấu.",
        "Türkçe: ğüşıöç İĞÜŞÖÇ",
        "Deutsch: Größe, Straße, Ärger, Öl, Übermut",
        "Français: œuvre, façade, naïve, à côté",
        "Español: ¿Dónde está la biblioteca? ¡Olé!",
        "Polski: zażółć gęślą jaźń",
        "e\u0301 combining acute vs é precomposed",
        "Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǧ̗͚̚o̙̔ͮ̇͐̇",
        "ᚠᛇᚻ᛫ᛒᛦᚦ runes",
        "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕞𝕒𝕥𝕙 𝒮𝒸𝓇𝒾𝓅𝓉",
        "Ελληνικά and English mixed with 中文 and العربية",
    ]
    # emoji, incl. ZWJ sequences, skin tones, flags, keycaps
    c += [
        "😀", "😀😃😄😁", "I love 🍕 and 🍣!", "👍🏽", "👍🏻👍🏼👍🏽👍🏾👍🏿",
        "👨‍👩‍👧‍👦", "family: 👨‍👩‍👧‍👦 and 👩‍❤️‍💋‍👨", "🏳️‍🌈 🏴‍☠️", "🇯🇵🇺🇸🇫🇷", "1️⃣ #️⃣ *️⃣",
        "❤️ ♥ ☺ ✔ ✨", "🧑🏿‍💻 coding", "emoji😀glued😀to😀words", "🤖: beep boop",
    ]
    # code
    c += [
        '#include <stdio.h>\nint main(void) {\n    printf("hello\\n");\n    return 0;\n}\n',
        "def f(x: int) -> int:\n    return x ** 2 + 1  # square plus one\n",
        "for (let i = 0; i < arr.length; i++) { console.log(`${i}: ${arr[i]}`); }",
        'fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * x).collect();\n    println!("{:?}", v);\n}',
        'package main\n\nimport "fmt"\n\nfunc main() {\n\tfmt.Println("go")\n}\n',
        "SELECT id, name FROM users WHERE age >= 18 AND name LIKE 'A%' ORDER BY id DESC;",
        '<div class="x"><a href="/p?a=1&amp;b=2">link</a></div>',
        '{"key": [1, 2.5, true, null], "nested": {"a": "b"}}',
        "for f in *.txt; do echo \"$f\" | sed 's/a/b/g'; done",
        "^(?:[a-z0-9!#$%&'*+/=?^_`{|}~-]+)@\\w+\\.com$",
        "\\begin{equation} E = mc^2 \\int_0^\\infty e^{-x^2} dx \\end{equation}",
        "x+=1;y-=2;z*=3;w/=4;a%=5;b<<=1;c>>=2;d&&=e||f",
        "    if (x) {\n        y();\n    }\n",
        "class Foo(Bar):\n\tdef __init__(self):\n\t\tsuper().__init__()\n",
        "int* p = &a[0]; p->next = NULL; // comment",
    ]
    # punctuation runs
    c += [
        "!!!", "...", "?!?!", "---", "***", "<<<>>>", "(){}[]", "@#$%^&*", "``", '"""', "~~~",
        "....!!!!????", "—–-", "…", "«guillemets» „quotes“", "a,b;c:d.e", "!!!hello!!!",
        "==> --> <== <->", "||||||||", "////", "\\\\\\", "_-_-_", "%%%", "$$$ 100", "#hashtag @mention",
    ]
    # special tokens embedded in text
    c += [
        "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
        "<|endoftext|>",
        "text before<|endoftext|>text after",
        "a<|im_end|>b",
        "<|im_start|><|im_end|>",
        "<|im_start",
        "<|im_start|>system\nYou are helpful.<|im_end|>",
        "<|endoftext|><|endoftext|><|endoftext|>",
        "<<|im_end|>>",
        "<repo_name>longctx<file_sep>src/main.c",
        "<|im_end|> <|im_end|>  <|im_end|>",
        " <|im_start|>",
        "<|IM_START|> not special",
        "<jupyter_code>print(1)<jupyter_output>1<empty_output>",
        "<|im_start|>user\n你好 😀<|im_end|>\n",
    ]
    # control characters and odd bytes that are still valid UTF-8
    c += ["\x00", "a\x00b", "\x1b[31mred\x1b[0m", "\x7f\x01\x02", "\ud7ff\ue000\uffff", "\U0010ffff"]
    # every C0 control byte, alone and inside words (SmolLM2's vocabulary lacks some of them)
    c += ["".join(chr(i) for i in range(32)), "w\x16i <\x16>", "a\x0bb\x0cc\x1fd"]
    c.append("")
    # a long paragraph
    para = (
        "Long-context inference is the art of answering a question about a very large input, "
        "such as an entire code base, a book, or a month of logs, without reading every token "
        "with full attention at every step. Hierarchically pruned attention keeps only the keys "
        "that matter; the rest stay in host memory until they are needed again. In 2024, models "
        "trained on 8,192 tokens were asked to read 1,000,000 tokens — and some of them did! "
        "Numbers like 3.14159, dates like 2024-11-22, and code like `x += 1;` all appear.\n\n"
    )
    c.append(para * 4)
    c.append(("The cat sat on the mat. " * 40).strip())
    c.append("word " * 100)
    c.append("x" * 300)
    c.append("!" * 100)
    c.append("9" * 100)
    c.append(" " * 100 + "end")
    c.append("\n" * 50 + "x")
    c.append("ab" * 200)
    return c


# ---- references -----------------------------------------------------------------------------

def gguf_tokenizer_fields(model):
    import gguf
    r = gguf.GGUFReader(model)
    f = r.fields
    toks = f["tokenizer.ggml.tokens"].contents()
    merges = f["tokenizer.ggml.merges"].contents()
    types = f["tokenizer.ggml.token_type"].contents()
    tmpl = f["tokenizer.chat_template"].contents() if "tokenizer.chat_template" in f else None
    return toks, merges, types, tmpl


def hf_tokenizer(model):
    from tokenizers import Tokenizer, models, pre_tokenizers, AddedToken
    toks, merges, types, _ = gguf_tokenizer_fields(model)
    vocab = {t: i for i, t in enumerate(toks)}
    mg = [tuple(m.split(" ", 1)) for m in merges]
    tk = Tokenizer(models.BPE(vocab=vocab, merges=mg))
    tk.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tk.add_special_tokens([AddedToken(toks[i], special=True, normalized=False)
                           for i, ty in enumerate(types) if ty == 3])
    return tk


class TransformersTokenizer:
    """transformers' tokenizer built from the GGUF (its qwen2 converter)."""

    def __init__(self, model):
        import transformers
        from transformers import AutoTokenizer
        d, f = os.path.split(os.path.abspath(model))
        self.tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
        self.version = transformers.__version__

    def encode(self, s, special):
        # split_special_tokens: special (control) tokens are plain text; user-defined added
        # tokens (<tool_call>) still match, as in llama.cpp with parse_special off
        return list(self.tok(s, add_special_tokens=False,
                             split_special_tokens=not special)["input_ids"])


class Reference:
    def __init__(self, model, hf_kind="rebuilt"):
        self.name = None
        self.llama = None
        self.hf = None
        self.hf_kind = hf_kind
        try:
            import llama_cpp
            self.llama = llama_cpp.Llama(model_path=model, vocab_only=True, verbose=False)
            self.name = "llama.cpp (llama-cpp-python %s)" % llama_cpp.__version__
        except ImportError:
            pass
        try:
            if hf_kind == "transformers":
                self.hf = TransformersTokenizer(model)
                if self.name is None:
                    self.name = "huggingface transformers %s (its GGUF tokenizer)" % \
                        self.hf.version
            else:
                self.hf = hf_tokenizer(model)
                if self.name is None:
                    self.name = "huggingface tokenizers (rebuilt from the GGUF)"
        except ImportError:
            pass
        if self.name is None:
            sys.exit("need llama_cpp (llama-cpp-python) or tokenizers")

    def hf_encode(self, b, special):
        s = b.decode("utf-8")
        if self.hf_kind == "transformers":
            return self.hf.encode(s, special)
        if special:
            return self.hf.encode(s, add_special_tokens=False).ids
        # no special-token matching: encode the text with the added tokens disabled, by
        # encoding pieces split at nothing (tokenizers has no switch): use the model directly
        out = []
        pre = self.hf.pre_tokenizer.pre_tokenize_str(s)
        for piece, _ in pre:
            out += [t.id for t in self.hf.model.tokenize(piece)]
        return out

    def encode(self, b, special):
        if self.llama is not None:
            return list(self.llama.tokenize(b, add_bos=False, special=special))
        return self.hf_encode(b, special)


# ---- chat -----------------------------------------------------------------------------------

LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim "
    "+ '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant"
    "<|end_header_id|>\n\n' }}{% endif %}"
)

MISTRAL_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != "
    "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
    "user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}"
    "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
    "{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant "
    "roles are supported!') }}{% endif %}{% endfor %}"
)

# Qwen2.5-Instruct's template, abridged to its message loop (tools branch dropped): a ChatML
# template whose default system prompt sits in an else-branch.
QWEN25_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}\n"
    "    {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n"
    "{%- else %}\n"
    "    {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
    "assistant.<|im_end|>\\n' }}\n"
    "{%- endif %}\n"
    "{%- for message in messages %}\n"
    "    {%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n"
    "    {%- elif message.role == \"assistant\" %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n"
    "{%- endif %}\n"
)

CONVERSATIONS = [
    [("user", "Hello!")],
    [("system", "You are a terse assistant."), ("user", "What is 2+2?")],
    [("user", "Hi"), ("assistant", "Hello! How can I help?"), ("user", "Tell me a joke.")],
    [("system", "Be brief."), ("user", "Hi"), ("assistant", "Hello."), ("user", "Bye")],
    [("user", "  padded content with spaces  \n"), ("assistant", " ok "), ("user", "\tx\n")],
    [("user", "Unicode: 你好 😀 مرحبا"), ("assistant", "多语言 ✔")],
    [("user", "line one\nline two\n\nline four")],
    [("user", "")],
    [("system", "sys only")],
]


def render(template, msgs, add_gen, bos=""):
    import jinja2

    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    t = env.from_string(template)
    return t.render(messages=[{"role": r, "content": c} for r, c in msgs],
                    add_generation_prompt=add_gen, bos_token=bos, eos_token="</s>")


def llama_cpp_builtin(tmpl, msgs, add_gen):
    """llama.cpp's non-Jinja formatter (llm_chat_apply_template) through the C binding."""
    import ctypes
    import llama_cpp
    arr = (llama_cpp.llama_chat_message * len(msgs))()
    keep = []
    for i, (r, c) in enumerate(msgs):
        rb, cb = r.encode(), c.encode()
        keep += [rb, cb]
        arr[i].role = rb
        arr[i].content = cb
    buf = ctypes.create_string_buffer(65536)
    n = llama_cpp.llama_chat_apply_template(tmpl.encode(), arr, len(msgs), add_gen, buf, 65536)
    if n < 0:
        return None
    return buf.raw[:n].decode()


def write_chat(smol_tmpl):
    """chat.txt: blocks of
         case <template> <default_system 0|1> <add_assistant 0|1> <n_msgs> <source>
         msg <role> <hex content>            (n_msgs lines)
         expect <hex>
       default_system 1: the test passes lc_chat_default_system(<template's jinja>)."""
    have_llama = True
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        have_llama = False
    lines = []
    n = 0
    disagree = 0
    for name, jinja, use_default in [("chatml", smol_tmpl, 1), ("chatml", QWEN25_TEMPLATE, 1),
                                     ("llama3", LLAMA3_TEMPLATE, 0),
                                     ("mistral", MISTRAL_TEMPLATE, 0)]:
        for msgs in CONVERSATIONS:
            for add_gen in (True, False):
                src = "jinja"
                try:
                    exp = render(jinja, msgs, add_gen)
                except Exception:
                    exp = None
                if exp is None:
                    if not have_llama:
                        continue
                    # Mistral-v0.1's template rejects system messages; llama.cpp's built-in
                    # formatter (which this template selects) folds them into the first turn.
                    exp = llama_cpp_builtin(jinja, msgs, add_gen)
                    src = "llama.cpp"
                    if exp is None:
                        continue
                elif have_llama and not use_default:
                    b = llama_cpp_builtin(jinja, msgs, add_gen)
                    if b is not None and b != exp:
                        disagree += 1
                lines.append("case %s %d %d %d %s %s" % (
                    name, use_default, 1 if add_gen else 0, len(msgs), src,
                    "qwen25" if jinja is QWEN25_TEMPLATE else name))
                for r, c in msgs:
                    lines.append("msg %s %s" % (r, c.encode().hex()))
                lines.append("expect %s" % exp.encode().hex())
                n += 1
    with open(os.path.join(OUT, "chat.txt"), "w") as f:
        f.write("# generated by scripts/gen_tokenizer_fixtures.py: chat template expectations\n")
        f.write("\n".join(lines) + "\n")
    for fname, text in [("template_smollm2.jinja", smol_tmpl), ("template_llama3.jinja", LLAMA3_TEMPLATE),
                        ("template_mistral.jinja", MISTRAL_TEMPLATE),
                        ("template_qwen25.jinja", QWEN25_TEMPLATE)]:
        with open(os.path.join(OUT, fname), "w") as f:
            f.write(text)
    print("chat: %d cases (%d where llama.cpp's built-in formatter differs from the Jinja "
          "template)" % (n, disagree))


def make_variant(model, pre, path):
    """A vocab-only copy of the model's metadata with tokenizer.ggml.pre replaced."""
    from gguf import GGUFReader, GGUFWriter, GGUFValueType
    r = GGUFReader(model)
    w = GGUFWriter(path, r.fields["general.architecture"].contents())
    for k, f in r.fields.items():
        if k.startswith("GGUF.") or k == "general.architecture":
            continue
        v = pre if k == "tokenizer.ggml.pre" else f.contents()
        if f.types[0] == GGUFValueType.ARRAY:
            w.add_key_value(k, v, f.types[0], sub_type=f.types[1])
        else:
            w.add_key_value(k, v, f.types[0])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_pre_variants(model, cases):
    try:
        import llama_cpp
    except ImportError:
        print("llama_cpp missing: smollm2-pre-*.tok left as they are")
        return
    import tempfile
    for pre in ("llama-bpe", "qwen2"):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "vocab.gguf")
            make_variant(model, pre, path)
            lm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
            lines = []
            for s in cases:
                b = s.encode("utf-8")
                for special in (False, True):
                    ids = lm.tokenize(b, add_bos=False, special=special)
                    lines.append("%s\t%s\t%s" % ("S" if special else "P", b.hex(),
                                                  " ".join(map(str, ids))))
            del lm
        out = os.path.join(OUT, "smollm2-pre-%s.tok" % pre)
        with open(out, "w") as f:
            f.write("# generated by scripts/gen_tokenizer_fixtures.py: %s's vocabulary with "
                    "tokenizer.ggml.pre = %s\n" % (os.path.basename(model), pre))
            f.write("# reference: llama.cpp (llama-cpp-python %s)\n" % llama_cpp.__version__)
            f.write("\n".join(lines) + "\n")
        print("%s: %d cases" % (os.path.relpath(out, ROOT), len(lines)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", choices=sorted(PRESETS), default="smollm2")
    ap.add_argument("--model", help="GGUF path (default: models/<the preset's file>)")
    a = ap.parse_args()
    preset = PRESETS[a.preset]
    a.model = a.model or os.path.join(ROOT, "models", preset["model"])
    os.makedirs(OUT, exist_ok=True)
    ref = Reference(a.model, preset["hf"])
    cases = corpus()
    assert len(cases) >= 200, len(cases)
    lines = []
    cross = 0
    for s in cases:
        b = s.encode("utf-8")
        for special in (False, True):
            ids = ref.encode(b, special)
            if ref.llama is not None and ref.hf is not None:
                h = ref.hf_encode(b, special)
                if h != ids:
                    cross += 1
                    print("note: HF tokenizers differs from llama.cpp on %r (special=%s)" % (s[:40], special))
            lines.append("%s\t%s\t%s" % ("S" if special else "P", b.hex(), " ".join(map(str, ids))))
    path = os.path.join(OUT, preset["tok"])
    with open(path, "w") as f:
        f.write("# generated by scripts/gen_tokenizer_fixtures.py from %s\n" % os.path.basename(a.model))
        f.write("# reference: %s\n" % ref.name)
        if ref.llama is not None and ref.hf is not None:
            f.write("# cross-check: Hugging Face (%s) gives the same ids on %d of %d cases\n" % (
                "transformers' GGUF tokenizer" if ref.hf_kind == "transformers"
                else "tokenizers rebuilt from the GGUF", len(lines) - cross, len(lines)))
        f.write("# P|S <TAB> hex(utf-8 input) <TAB> token ids (S: parse_special on)\n")
        f.write("\n".join(lines) + "\n")
    print("%s: %d strings, %d cases, reference %s, %d cross-check differences" % (
        os.path.relpath(path, ROOT), len(cases), len(lines), ref.name, cross))
    if not preset["extras"]:
        return
    write_pre_variants(a.model, cases)
    _, _, _, tmpl = gguf_tokenizer_fields(a.model)
    write_chat(tmpl)


if __name__ == "__main__":
    main()
