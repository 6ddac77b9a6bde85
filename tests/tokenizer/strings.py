"""The committed tokenizer test strings (bytes, so invalid UTF-8 can be written down).

gen_expected.py runs llama.cpp's llama-tokenize on each of them for each vocabulary and writes
expected/<vocab>.txt; tests/test_tokenizer_vectors.c compares our ids with those files.
Names are single words ([a-z0-9_]); the order is the order of the expected files.
"""

PARAGRAPH = (
    "The tokenizer splits text into pieces. In 2024, models such as Llama-3 and Qwen2 used "
    "byte-level BPE; Gemma uses SentencePiece with 262,144 tokens! Numbers: 3.14159, 1e-10, "
    "0xDEADBEEF, 1,000,000. Mixed: naïve café — “quotes” and ‘apostrophes’… end.\n"
)

CASES = [
    ("ascii", b"Hello world"),
    ("sentence", b"The quick brown fox jumps over the lazy dog."),
    ("leading_space", b" Hello"),
    ("leading_spaces", b"   Hello   world"),
    ("trailing_spaces", b"Hello   "),
    ("space_runs", b"a  b   c    d     e"),
    ("only_spaces", b"     "),
    ("single_space", b" "),
    ("tabs", b"\tindented\t\ttabs\t"),
    ("newlines", b"line1\nline2\n\nline4\r\nwindows\r\n"),
    ("only_newlines", b"\n\n\n"),
    ("whitespace_mix", b" \t \n \r\n  \n\n\n   x \t"),
    ("digits", b"0 1 12 123 1234 12345 123456"),
    ("long_number", b"3.14159265358979323846264338327950288419716939937510"),
    ("number_words", b"There are 1000000 reasons, the 42nd and 7th of 2024."),
    ("punctuation", b"Hello, world! How's it going? (Fine.) [ok] {yes}; a:b - c/d... "
                    b"\"quoted\" 'single' @#$%^&*~`|\\ <tag> ==> !!!"),
    ("contractions", b"it's don't we're they've I'm you'll he'd IT'S DON'T WE'RE They'Ve"),
    ("code", b"def f(x):\n    return x**2 + 1  # comment\n\nif __name__ == '__main__':\n\tf(3)\n"),
    ("cjk", "你好，世界。日本語のテキスト、カタカナ。한국어 텍스트입니다.".encode()),
    ("emoji", "I \u2764\ufe0f emoji \U0001f642\U0001f643 \U0001f44d\U0001f3fd!".encode()),
    ("emoji_zwj", "family: \U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466 "
                  "flag: \U0001f3f3\ufe0f\u200d\U0001f308 \U0001f1ef\U0001f1f5".encode()),
    ("accented", "café naïve résumé Ångström façade Øre Ünïcödé".encode()),
    ("combining", "e\u0301 a\u0308 n\u0303 A\u030a".encode()),
    ("mixed_scripts", "Hello мир 世界 مرحبا שלום नमस्ते Γειά σου ไทย".encode()),
    ("unicode_spaces", "a\u00a0b\u3000c\u2003d\u200be\u2028f".encode()),
    ("unicode_punct", "it\u2019s \u2018q\u2019 \u201cdq\u201d \u2014 \u2026 \u00bfqu\u00e9? \u00a1s\u00ed!".encode()),
    ("math", "\u2211 x\u00b2 \u2264 \u221e \u2192 \u2200\u03b5>0, \u00bd + \u2153 = \u2165".encode()),
    ("invalid_utf8", b"abc\xff\xfedef\x80\xc3(\xe2\x82 end"),
    ("truncated_utf8", b"caf\xc3"),
    ("lone_continuation", b"\x80\x81\x82 x"),
    ("overlong_surrogate", b"a\xc0\xafb\xed\xa0\x80c"),
    ("empty", b""),
    ("arabic_digits", "\u0661\u0662\u0663\u0664 \u0665\u0666 \u0968\u0969".encode()),
    ("fullwidth", "\uff21\uff22\uff23\uff11\uff12\uff13\uff01 \uff08\uff09".encode()),
    ("cr_only", b"a\rb\r\r c\r"),
    ("controls", b"a\x00b\x01c\x7fd\x1b[0m e\x0bf\x0cg"),
    ("space_digits", b" 1 22 333 4444 x1y22 3.5"),
    ("apostrophes", b"' 's ''s x' 'S 'LL 'll' don''t"),
    ("tab_words", b"\tword\n\tword\t\t\n"),
    ("long_spaces", b"x" + b" " * 40 + b"y" + b"\t" * 20 + b"z" + b"\n" * 12 + b"end"),
    ("space_newline_mix", b"a \n b  \n\n  c \r\n d"),
    ("url", b"https://example.com/path/to?query=1&b=two#frag"),
    ("repeat_long", b"a" * 300 + b" " + b"=" * 64 + b" " + b"ab" * 50),
    ("paragraph", PARAGRAPH.encode()),
    ("special_gemma", b"<start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\n"),
    ("special_gemma_tokens", b"<bos>text<eos> <pad><unk><mask>[multimodal]"),
    ("special_llama3", b"<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"),
    ("special_qwen", b"<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"),
    ("special_llama2", b"<s>[INST] Hi [/INST] ok</s><unk>"),
    ("special_gpt2", b"Hello<|endoftext|>World <|endoftext|>"),
    ("special_adjacent", b"<start_of_turn><start_of_turn><end_of_turn>\n\n<bos><|im_end|><|im_end|>"),
    ("special_partial", b"<start_of_turn <|im_start| <s <|endoftext"),
]
