#!/usr/bin/env python3
"""Vocabularies the tests need that llama.cpp does not ship: a shipped one with another
tokenizer.ggml.pre, written with the gguf package (0.19.0, what scripts/install-deps.sh pins).

    python3 tests/tokenizer/derive_vocab.py [--vocab-dir DIR] [--check]

ggml-vocab-gpt-4o.gguf: ggml-vocab-qwen2.gguf (byte-level BPE, 151936 tokens) with
tokenizer.ggml.pre = "gpt-4o", so llama.cpp (and we) split it with the o200k pre-tokenizer that
gpt-oss files name. No o200k vocabulary is available here; the pre-tokenizer is the part under
test, and the merges of any byte-level BPE vocabulary exercise it the same way. Every other
key, its type and its order are the source's. The result's sha256 is recorded below and
checked after writing (scripts/fetch-vocab.sh runs this; the tests do not re-hash).
"""
import argparse
import os
import sys

from gguf import GGUFReader, GGUFValueType, GGUFWriter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_expected import sha256  # noqa: E402  (the suite's one file hash)

# name -> (source vocabulary, new tokenizer.ggml.pre, sha256 of the result)
DERIVED = {
    "gpt-4o": ("qwen2", "gpt-4o", "d9370dd93a3d3fd33329f67814017db44dcf3e7ee477c1da33fc47bebf21be6a"),
}

# Keys GGUFWriter writes itself (the header fields the reader lists as keys).
HEADER = {"GGUF.version", "GGUF.tensor_count", "GGUF.kv_count"}


def derive(src, dst, pre):
    r = GGUFReader(src)
    assert len(r.tensors) == 0, "%s: a vocabulary-only file was expected" % src
    arch = r.fields["general.architecture"].contents()
    w = GGUFWriter(dst, arch)
    for key, field in r.fields.items():
        if key in HEADER or key == "general.architecture":
            continue  # the writer writes the architecture from its constructor argument, first
        vtype = field.types[0]
        sub = field.types[1] if vtype == GGUFValueType.ARRAY else None
        val = pre if key == "tokenizer.ggml.pre" else field.contents()
        w.add_key_value(key, val, vtype, sub_type=sub)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def same_except_pre(src, dst, pre):
    """The written file reads back as the source with only tokenizer.ggml.pre changed."""
    a, b = GGUFReader(src), GGUFReader(dst)
    if list(a.fields) != list(b.fields):
        return False
    for key in a.fields:
        fa, fb = a.fields[key], b.fields[key]
        if key == "tokenizer.ggml.pre":
            if fb.contents() != pre:
                return False
        elif key not in HEADER and (fa.types != fb.types or fa.contents() != fb.contents()):
            return False
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vocab-dir", default=os.environ.get(
        "BACKPLANE_VOCAB_DIR", os.path.expanduser("~/.cache/backplane/vocab")))
    ap.add_argument("--check", action="store_true", help="also read the result back and compare it key by key")
    args = ap.parse_args()
    bad = 0
    for name, (source, pre, want) in DERIVED.items():
        src = os.path.join(args.vocab_dir, "ggml-vocab-%s.gguf" % source)
        dst = os.path.join(args.vocab_dir, "ggml-vocab-%s.gguf" % name)
        tmp = dst + ".tmp"
        derive(src, tmp, pre)
        if args.check and not same_except_pre(src, tmp, pre):
            print("derive_vocab: %s does not read back as %s with pre=%s" % (name, source, pre), file=sys.stderr)
            bad += 1
            continue
        got = sha256(tmp)
        if want and got != want:
            print("derive_vocab: %s: sha256 %s, expected %s (another gguf package version?)" % (name, got, want),
                  file=sys.stderr)
            os.unlink(tmp)
            bad += 1
            continue
        os.replace(tmp, dst)
        print("derive_vocab: wrote %s (from %s, pre=%s, sha256=%s)" % (dst, source, pre, got))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
