#!/usr/bin/env python3
"""Differential fuzzing against llama.cpp: random strings, our ids vs llama_tokenize's.

    python3 tests/tokenizer/fuzz_vs_llama.py [--n 3000] [--seed 1] [--build build]
        [--llama SRC] [--llama-build DIR]   (llama.cpp's tree and its build, default SRC/build)
        [--vocab PATH ...]   (other GGUFs instead of the test vocabularies, e.g.
                              /tmp/llama.cpp/models/ggml-vocab-phi-3.gguf, or
                              ~/.cache/backplane/vocab/ggml-vocab-gpt-4o.gguf)
        [--splits-gpt4o]     (also compare the gpt-4o pre-tokenizer's word splits with
                              llama.cpp's unicode_regex_split on --n valid-UTF-8 strings)

Builds two small drivers in a temporary folder: one against llama.cpp's libllama
(/tmp/llama.cpp, the same build gen_expected.py uses), one against our build/libbackplane.a;
both read lines "ADD PARSE HEX" and print the ids. Strings are drawn two ways: concatenations of
pieces chosen to hit the rules (whitespace runs, contractions, digits, scripts, emoji, special
tokens, invalid UTF-8), and random code points over the whole Unicode range or random bytes.
add_special and parse_special are random per string. Prints the mismatches per vocabulary
(the first few in full); exit status 1 if any. Not part of the suite: it needs llama.cpp.
"""
import argparse
import os
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from gen_expected import VOCABS, vocab_path  # noqa: E402

LLAMA_DRIVER = r"""// Reads lines "ADD PARSE HEX" from stdin, prints the llama.cpp token ids per line.
#include "llama.h"
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>
int main(int argc, char **argv) {
    llama_backend_init();
    llama_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
    auto mp = llama_model_default_params(); mp.vocab_only = true;
    llama_model *m = llama_model_load_from_file(argv[1], mp);
    const llama_vocab *v = llama_model_get_vocab(m);
    std::string line;
    while (std::getline(std::cin, line)) {
        int add = line[0]-'0', parse = line[2]-'0';
        std::string hex = line.substr(4), text;
        for (size_t i = 0; i + 1 < hex.size(); i += 2) text.push_back((char)std::stoi(hex.substr(i, 2), nullptr, 16));
        std::vector<llama_token> ids(text.size() + 16);
        int n;
        try {
            n = llama_tokenize(v, text.data(), text.size(), ids.data(), ids.size(), add, parse);
            if (n < 0) { ids.resize(-n); n = llama_tokenize(v, text.data(), text.size(), ids.data(), ids.size(), add, parse); }
        } catch (const std::exception &) { printf("EXC\n"); continue; }  // e.g. a 4-byte sequence past U+10FFFF
        for (int i = 0; i < n; i++) printf(i ? ",%d" : "%d", ids[i]);
        printf("\n");
    }
}
"""

OUR_DRIVER = r"""#include <backplane.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc,char**argv){ bp_gguf*f; bp_tokenizer*t; if(bp_gguf_open(argv[1],&f)||bp_tokenizer_create(f,&t)){fprintf(stderr,"%s\n",bp_last_error());return 1;}
 static char line[1<<20]; static char text[1<<19];
 while(fgets(line,sizeof line,stdin)){ int add=line[0]-'0', parse=line[2]-'0'; char*h=line+4; size_t n=0; while(h[0]&&h[1]&&h[0]!='\n'){unsigned v; sscanf(h,"%2x",&v); text[n++]=(char)v; h+=2;}
  bp_token*ids; size_t m; if(bp_tokenizer_encode_alloc(t,text,n,add,parse,&ids,&m)){printf("ERR %s\n",bp_last_error());continue;}
  for(size_t i=0;i<m;i++) printf(i?",%d":"%d",ids[i]); printf("\n"); bp_tokens_free(ids);} return 0;}
"""

PIECES = [" ", "  ", "   ", "\t", "\n", "\r\n", "\r", "\n\n", "a", "Hello", "world", "'s", "'T", "'re",
          "'LL", "'", "''", "123", "4567890", "3.14", "\uff11\uff12", "\u0663", "\u00b2", "\u2165", "\u00e9",
          "e\u0301", "\u00df", "\u0130", "K", "\u212a", "\u4f60\u597d", "\u65e5\u672c", "\ud55c\uad6d",
          "\u043c\u0438\u0440", "\u0645\u0631\u062d\u0628\u0627", "\u0928\u092e\u0938\u094d\u0924\u0947",
          "\U0001f642", "\U0001f468\u200d\U0001f469\u200d\U0001f467", "\U0001f1ef\U0001f1f5", "\u200b",
          "\u00a0", "\u3000", "\u2028", "\u0085", "!", "?!", "...", "\u2014", "\u201c", "\u201d", "$", "+",
          "<", ">", "<s>", "</s>", "<|endoftext|>", "<|im_start|>", "<start_of_turn>", "<end_of_turn>", "<bos>",
          "<|eot_id|>", "<unused0>", "[multimodal]", "<|end|>", "<|user|>", "<|assistant|>", "<mask>", "\x00", "\x7f", "\x1b", "x", "Z", "_", "-", "==", "//",
          "#", "@", "\\", "{", "}",
          "HELLOworld", "McDonald", "iPhone", "ABC", "\u00c9COLE", "\u00c9t\u00c9", "'S", "'Ll", "'rE", "/", "!\n/"]
RAW = [b"\xff", b"\xc3", b"\x80", b"\xe2\x82", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf0\x9f"]


def random_text(rng):
    if rng.random() < 0.5:
        return b"".join(rng.choice(RAW) if rng.random() < 0.05 else rng.choice(PIECES).encode()
                        for _ in range(rng.randint(0, 12)))
    if rng.random() < 0.3:
        return bytes(rng.randint(0, 255) for _ in range(rng.randint(0, 24)))
    cps = []
    for _ in range(rng.randint(0, 16)):
        r = rng.random()
        c = (rng.randint(0x20, 0x7E) if r < 0.3 else rng.choice([0x20, 0x20, 0x9, 0xA, 0xD, 0x27]) if r < 0.4
             else rng.randint(0x80, 0x2FFF) if r < 0.7 else rng.randint(0x3000, 0xFFFF) if r < 0.9
             else rng.randint(0x10000, 0x10FFFF))
        cps.append(chr(0x41 if 0xD800 <= c <= 0xDFFF else c))
    return "".join(cps).encode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--llama", default="/tmp/llama.cpp")
    ap.add_argument("--llama-build", help="llama.cpp's build folder (default LLAMA/build)")
    ap.add_argument("--splits-gpt4o", action="store_true")
    ap.add_argument("--vocab", action="append", help="a GGUF to test instead of the test vocabularies")
    ap.add_argument("--vocab-dir", default=os.environ.get(
        "BACKPLANE_VOCAB_DIR", os.path.expanduser("~/.cache/backplane/vocab")))
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bp_fuzz_")
    lib = os.path.join(args.llama_build or os.path.join(args.llama, "build"), "bin")
    with open(os.path.join(tmp, "llama_many.cpp"), "w") as f:
        f.write(LLAMA_DRIVER)
    with open(os.path.join(tmp, "our_many.c"), "w") as f:
        f.write(OUR_DRIVER)
    subprocess.run(["g++", "-O2", "-std=c++17", "-I" + args.llama + "/include", "-I" + args.llama + "/ggml/include",
                    os.path.join(tmp, "llama_many.cpp"), "-L" + lib, "-lllama", "-lggml", "-lggml-base",
                    "-Wl,-rpath," + lib, "-o", os.path.join(tmp, "llama_many")], check=True)
    subprocess.run(["gcc", "-O2", "-I" + ROOT + "/include", "-I" + ROOT + "/src/kinds", os.path.join(tmp, "our_many.c"),
                    os.path.join(args.build, "libbackplane.a"), "-lm", "-lpthread", "-o", os.path.join(tmp, "our_many")],
                   check=True)
    rng = random.Random(args.seed)
    lines = ["%d %d %s" % (rng.randint(0, 1), rng.randint(0, 1), random_text(rng).hex()) for _ in range(args.n)]
    inp = ("\n".join(lines) + "\n").encode()
    total_bad = 0
    models = [(os.path.basename(v), v) for v in args.vocab] if args.vocab else \
        [(name, vocab_path(name, args.vocab_dir)) for name in VOCABS]
    for name, model in models:
        want = subprocess.run([os.path.join(tmp, "llama_many"), model], input=inp, stdout=subprocess.PIPE,
                              check=True).stdout.decode().splitlines()
        got = subprocess.run([os.path.join(tmp, "our_many"), model], input=inp, stdout=subprocess.PIPE,
                             check=True).stdout.decode().splitlines()
        # llama.cpp throws on some invalid UTF-8 (a 4-byte form past U+10FFFF) where we read the
        # bytes as invalid: those strings have no reference and are counted apart.
        exc = sum(w == "EXC" for w in want)
        bad = [(l, w, g) for l, w, g in zip(lines, want, got) if w != g and w != "EXC"]
        bad += [("(missing output)", "", "")] * abs(len(want) - len(got))
        total_bad += len(bad)
        print("%-10s %d/%d equal (%d where llama.cpp throws)" % (name, args.n - exc - len(bad), args.n - exc, exc))
        for l, w, g in bad[:3]:
            print("   add/parse %s text %r\n   llama.cpp %s\n   ours      %s" % (l[:3], bytes.fromhex(l[4:]), w, g))
    if args.splits_gpt4o:
        total_bad += fuzz_splits_gpt4o(args, tmp, lib)
    sys.exit(1 if total_bad else 0)


OUR_SPLIT_DRIVER = r"""#include <stdio.h>
#include <stdlib.h>
#include "text/tokenizer_internal.h"
#include "text/unicode.h"
int main(void){ static char line[1<<16]; static uint8_t b[1<<15]; static uint32_t c[1<<15], e[1<<15], s[1<<15];
 static uint16_t f[1<<15];
 while(fgets(line,sizeof line,stdin)){ size_t nb=0,n=0; for(char*h=line;h[0]&&h[1]&&h[0]!='\n';h+=2){unsigned v; sscanf(h,"%2x",&v); b[nb++]=(uint8_t)v;}
  for(size_t pos=0;pos<nb;n++){c[n]=bp_utf8_decode(b,nb,&pos); f[n]=(uint16_t)bp_unicode_flags(c[n]);}
  size_t m=bp_pretok_split(BP_PRETOK_GPT4O,c,f,n,e,s); for(size_t i=0;i<m;i++) printf(i?",%u":"%u",(unsigned)e[i]); printf("\n");}
 return 0;}
"""


def fuzz_splits_gpt4o(args, tmp, lib):
    """Word splits of --n random valid-UTF-8 strings (gen_suite_gpt4o's generator, this seed):
    ours (bp_pretok_split) against llama.cpp's unicode_regex_split with the gpt-4o regex."""
    from gen_suite_gpt4o import GPT4O_REGEX_SRC, SPLIT_DRIVER, split_text
    src = os.path.join(tmp, "llama_split.cpp")
    with open(src, "w") as f:
        f.write(SPLIT_DRIVER.replace("REGEX", GPT4O_REGEX_SRC))
    subprocess.run(["g++", "-O2", "-std=c++17", src, "-L" + lib, "-lllama", "-Wl,-rpath," + lib,
                    "-o", os.path.join(tmp, "llama_split")], check=True)
    with open(os.path.join(tmp, "our_split.c"), "w") as f:
        f.write(OUR_SPLIT_DRIVER)
    subprocess.run(["gcc", "-O2", "-I" + ROOT + "/include", "-I" + ROOT + "/src", os.path.join(tmp, "our_split.c"),
                    os.path.join(args.build, "libbackplane.a"), "-lm", "-lpthread", "-o", os.path.join(tmp, "our_split")],
                   check=True)
    rng = random.Random(args.seed)
    texts = [split_text(rng).encode() for _ in range(args.n)]
    inp = "".join("%s\n" % t.hex() for t in texts).encode()
    want = subprocess.run([os.path.join(tmp, "llama_split")], input=inp, stdout=subprocess.PIPE,
                          check=True).stdout.decode().splitlines()
    got = subprocess.run([os.path.join(tmp, "our_split")], input=inp, stdout=subprocess.PIPE,
                         check=True).stdout.decode().splitlines()
    bad = [(t, w, g) for t, w, g in zip(texts, want, got) if w != g] + [(b"(missing output)", "", "")] * abs(
        len(want) - len(got))
    print("%-10s %d/%d word splits equal" % ("gpt-4o", len(texts) - len(bad), len(texts)))
    for t, w, g in bad[:3]:
        print("   text %r\n   llama.cpp %s\n   ours      %s" % (t, w, g))
    return len(bad)


if __name__ == "__main__":
    main()
