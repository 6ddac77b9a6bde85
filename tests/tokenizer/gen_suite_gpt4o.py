#!/usr/bin/env python3
"""The gpt-4o pair of the llama.cpp suite, made by llama.cpp itself: llama-suite/ggml-vocab-gpt-4o.gguf.{inp,out}.

    python3 tests/tokenizer/gen_suite_gpt4o.py [--check]
        [--llama /tmp/lcp/llama_cpp_python-0.3.36/vendor/llama.cpp] [--llama-build /tmp/llamacpp32/build]

llama.cpp ships no o200k vocabulary and no .inp/.out for its "gpt-4o" pre-tokenizer, so this
pair is ours, in llama.cpp's format (llama-suite/README.md): the strings are those of
llama.cpp's qwen2 .inp, then CORNERS below, aimed at the corners of the regex llama.cpp runs for
gpt-4o (tokenizer_pretok_o200k.c quotes it). The ids come from llama.cpp (commit 0c1e570, the
llama-cpp-python 0.3.36 sdist) through llama_tokenize with add_special and parse_special off,
the way its test-tokenizer-0 makes a .out, on ggml-vocab-gpt-4o.gguf (tests/tokenizer/
derive_vocab.py: llama.cpp's qwen2 vocabulary with tokenizer.ggml.pre = "gpt-4o").

Ids see a split only where the vocabulary merges across it (qwen2 has no multi-digit tokens,
for one), so it also writes tokenizer/splits-gpt-4o.txt: the words llama.cpp's own
unicode_regex_split (exported by libllama) cuts the same strings into, plus SPLIT_RANDOM seeded
random valid-UTF-8 strings, with the gpt-4o regex (checked to be the one in llama-vocab.cpp).
tests/test_tokenizer_splits.c holds our pre-tokenizer to every record. --check exits 1 if the
committed files differ from a fresh run.
"""
import argparse
import os
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from fuzz_vs_llama import LLAMA_DRIVER  # noqa: E402

SEP = b"\n__ggml_vocab_test__\n"

CORNERS = [
    # mixed case: upper* lower+ first, then upper+ lower*
    "HelloWorld", "helloWorld", "HELLOworld", "HELLO", "HELLO World", "McDonald's", "iPhone",
    "camelCaseWordsHere", "XMLHttpRequest", "ABCdef GHI jkl", "aB", "Ab", "AB", "a", "A",
    # non-ASCII letters are both upper and lower to llama.cpp's approximation
    "\u00c9COLE", "\u00e9cole", "\u00c9cole", "\u00e9A", "A\u00e9", "A\u00e9B", "AB\u00e9CD", "\u00c4pfel\u00d6l",
    "\u0391\u03b8\u03ae\u03bd\u03b1 \u0391\u0398\u0397\u039d\u0391", "\u041c\u043e\u0441\u043a\u0432\u0430 \u041c\u041e\u0421\u041a\u0412\u0410",
    "\u00dfSTRASSE", "stra\u00dfe", "\u0130stanbul", "\u01c5ungla", "HTML\u00e9l\u00e9ment",
    "\u4f60\u597d\u4e16\u754c", "\u65e5\u672c\u8a9eABC", "\ud55c\uad6d\uc5b4 text",
    # combining marks: not letters, so they end a word and join punctuation
    "e\u0301cole", "E\u0301COLE", "Cafe\u0301s", "\u0928\u092e\u0938\u094d\u0924\u0947",
    "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35", "a\u0308b", " \u0301x",
    # contractions, any case, only after letters
    "it's", "IT'S", "It'S", "we'LL", "WE'll", "they're", "THEY'RE", "I've", "I'VE", "I'm", "I'M",
    "he'd", "HE'D", "don't", "DON'T", "'s", "'S", "'LL", "x'll've", "o'clock", "rock'n'roll",
    "\u00e9'S", "A'\u00e9", "can't'", "'''", "Bob's'", "y'all", "Y'ALL",
    # digits: runs of one to three
    "1234", "12345678901", "a1b22c333d4444", "3.14159", "1,000,000", "\u0661\u0662\u0663\u0664",
    "\u00b2\u00b3", "\uff11\uff12\uff13\uff14", "\u2165\u2166", "0x1F", "v2.0.1",
    # whitespace and newlines
    "\r\n", "a\r\nb", "a\r\n\r\nb", " \r\n ", "\n\r", "\r", "line1\nline2\r\nline3",
    "  leading", "   leading three", "\tTab", "\t\tTabs", "trailing  ", "trailing\n", "a \n b",
    "\u3000Ideographic", "x\u00a0y", "\u2028next", "\u0085nel", "a\v\fb", "  \n\n  x",
    # punctuation, with trailing newlines and slashes
    "!\n", "!!\n\n", "?\r\n", "a.\nb", "path/to/file", "http://example.com/a/b", "//comment",
    "end.\n/", " /", " //\n", "x = y;\n", "{\n  \"k\": [1, 2]\n}", "a -> b", "--flag", "#include <stdio.h>\n",
    "\u2014dash\u2014", "\u201cquoted\u201d", "\u00bfQu\u00e9?", "\U0001f642smile", "(\u00e9)", "'\u00e9",
    "\x00", "a\x00b", "\x1b[0m", "\x7f",
    # a lead character before a word, and the lines of code o200k was built for
    " Hello", "_Hello", "$Var", "@User", "#Tag", "\"Quote\"", "(Paren)", "-Lower", "1Abc", "\nHello",
    "def f(x):\n    return x*2\n", "if (a && b) { return; }", "SELECT * FROM t WHERE id=1;",
]


# The regex llama-vocab.cpp gives LLAMA_VOCAB_PRE_TYPE_GPT4O (its approximation of o200k's), as
# C++ source text; main() checks that llama-vocab.cpp holds exactly this.
GPT4O_REGEX_SRC = (
    r'"[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+'
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|"
    r'[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*'
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|"
    r'\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"')

SPLIT_DRIVER = r"""// Reads hex lines (valid UTF-8), prints the code-point end of each word llama.cpp's
// unicode_regex_split cuts the text into with the gpt-4o regex.
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>
std::vector<std::string> unicode_regex_split(const std::string &text, const std::vector<std::string> &regex_exprs,
                                             bool byte_encode);
std::vector<uint32_t> unicode_cpts_from_utf8(const std::string &utf8);
static const std::string regex = REGEX;
int main() {
    std::string line;
    while (std::getline(std::cin, line)) {
        std::string text;
        for (size_t i = 0; i + 1 < line.size(); i += 2) text.push_back((char)std::stoi(line.substr(i, 2), nullptr, 16));
        size_t end = 0;
        bool first = true;
        for (const std::string &w : unicode_regex_split(text, {regex}, false)) {
            end += unicode_cpts_from_utf8(w).size();
            printf(first ? "%zu" : ",%zu", end);
            first = false;
        }
        printf("\n");
    }
}
"""

# Pieces the random split strings are drawn from, besides random code points.
SPLIT_PIECES = ["a", "z", "A", "Z", "Hello", "HELLO", "hELLO", "McD", "\u00e9", "\u00c9", "\u00df", "\u0130",
                "\u01c5", "\u03a9", "\u03c9", "\u4e2d", "\u3042", "\u0301", "\u0308", "\u094d", "'", "'s",
                "'S", "'ll", "'LL", "'Re", "'vE", "'m", "'D", "'t", "'x", "1", "22", "333", "4444", "\u0663",
                "\u00b2", "\uff11", " ", "  ", "\t", "\n", "\r", "\r\n", "\v", "\f", "\u00a0", "\u3000",
                "\u2028", "\u0085", "\u200b", "!", ".", ",", "/", "//", "-", "_", "$", "\u2014", "\u201c",
                "\U0001f642", "\x00", "\x1f", "\x7f", "\ufffd"]
SPLIT_RANDOM = 1500


def split_text(rng):
    if rng.random() < 0.7:
        return "".join(rng.choice(SPLIT_PIECES) for _ in range(rng.randint(1, 14)))
    cps = []
    for _ in range(rng.randint(1, 16)):
        r = rng.random()
        c = (rng.randint(0x20, 0x7E) if r < 0.35 else rng.choice([0x20, 0x9, 0xA, 0xB, 0xD, 0x27, 0x2F]) if r < 0.5
             else rng.randint(0x80, 0x2FFF) if r < 0.8 else rng.randint(0x3000, 0xFFFF) if r < 0.93
             else rng.randint(0x10000, 0x10FFFF))
        cps.append(chr(0x41 if 0xD800 <= c <= 0xDFFF else c))
    return "".join(cps)


def strings_of(inp):
    parts = inp.split(SEP)
    return parts[:-1]  # test-tokenizer-0: nothing after the last separator is a string


def build_driver(llama, build, tmp, name, code):
    src = os.path.join(tmp, name + ".cpp")
    with open(src, "w") as f:
        f.write(code)
    exe = os.path.join(tmp, name)
    lib = os.path.join(build, "bin")
    subprocess.run(["g++", "-O2", "-std=c++17", "-I" + llama + "/include", "-I" + llama + "/ggml/include", src,
                    "-L" + lib, "-lllama", "-lggml", "-lggml-base", "-Wl,-rpath," + lib, "-o", exe], check=True)
    return exe


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--llama", default="/tmp/lcp/llama_cpp_python-0.3.36/vendor/llama.cpp")
    ap.add_argument("--llama-build", default="/tmp/llamacpp32/build")
    ap.add_argument("--vocab-dir", default=os.environ.get(
        "BACKPLANE_VOCAB_DIR", os.path.expanduser("~/.cache/backplane/vocab")))
    args = ap.parse_args()
    suite = os.path.join(HERE, "llama-suite")
    with open(os.path.join(suite, "ggml-vocab-qwen2.gguf.inp"), "rb") as f:
        texts = strings_of(f.read()) + [s.encode() for s in CORNERS]
    inp = b"".join(t + SEP for t in texts)
    with open(os.path.join(args.llama, "src", "llama-vocab.cpp")) as f:
        assert GPT4O_REGEX_SRC in f.read(), "llama-vocab.cpp does not hold the gpt-4o regex this script has"
    rng = random.Random(4)
    split_texts = [t for t in texts if t] + [split_text(rng).encode() for _ in range(SPLIT_RANDOM)]
    with tempfile.TemporaryDirectory(prefix="bp_gpt4o_") as tmp:
        exe = build_driver(args.llama, args.llama_build, tmp, "llama_many", LLAMA_DRIVER)
        lines = "".join("0 0 %s\n" % t.hex() for t in texts).encode()
        model = os.path.join(args.vocab_dir, "ggml-vocab-gpt-4o.gguf")
        got = subprocess.run([exe, model], input=lines, stdout=subprocess.PIPE, check=True).stdout.decode()
        split_exe = build_driver(args.llama, args.llama_build, tmp, "llama_split",
                                 SPLIT_DRIVER.replace("REGEX", GPT4O_REGEX_SRC))
        split_in = "".join("%s\n" % t.hex() for t in split_texts).encode()
        split_ends = subprocess.run([split_exe], input=split_in, stdout=subprocess.PIPE,
                                    check=True).stdout.decode().splitlines()
    assert len(split_ends) == len(split_texts)
    splits = ["# GENERATED by tests/tokenizer/gen_suite_gpt4o.py from llama.cpp's unicode_regex_split (commit",
              "# 0c1e570) with the gpt-4o regex; do not edit. One string a line: its UTF-8 in hex, a",
              "# space, the code-point end of each word, comma-separated (tests/test_tokenizer_splits.c)."]
    splits += ["%s %s" % (t.hex(), e) for t, e in zip(split_texts, split_ends)]
    ids = got.splitlines()
    assert len(ids) == len(texts) and "EXC" not in ids, "llama.cpp gave %d lines for %d strings" % (len(ids), len(texts))
    # as test-tokenizer-0 writes a .out: each id after a space, one line per string
    out = "".join("".join(" " + i for i in line.split(",") if i) + "\n" for line in ids).encode()
    files = {os.path.join(suite, "ggml-vocab-gpt-4o.gguf.inp"): inp,
             os.path.join(suite, "ggml-vocab-gpt-4o.gguf.out"): out,
             os.path.join(HERE, "splits-gpt-4o.txt"): ("\n".join(splits) + "\n").encode()}
    bad = 0
    for path, data in files.items():
        if args.check:
            with open(path, "rb") as f:
                same = f.read() == data
            print("%s: %s" % (path, "matches" if same else "DIFFERS"))
            bad += not same
        else:
            with open(path, "wb") as f:
                f.write(data)
            print("wrote %s" % path)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
