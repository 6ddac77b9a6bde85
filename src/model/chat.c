/* Built-in chat templates, one per family (archs.def's chat column), for a single user turn
 * followed by the opening of the assistant's turn. Not a Jinja engine: the file's
 * tokenizer.chat_template is not interpreted; these are the formats those templates produce for
 * one user message:
 *
 *   gemma    <start_of_turn>user\n{p}<end_of_turn>\n<start_of_turn>model\n
 *   chatml   <|im_start|>user\n{p}<|im_end|>\n<|im_start|>assistant\n          (Qwen 2, Qwen 3)
 *   llama3   <|start_header_id|>user<|end_header_id|>\n\n{p}<|eot_id|>
 *            <|start_header_id|>assistant<|end_header_id|>\n\n
 *            (llama files whose vocabulary has <|start_header_id|>)
 *   llama2   [INST] {p} [/INST]                                      (other llama: Llama 2, Mistral)
 *
 * BOS is not part of the text: encoding with add_special adds it where the vocabulary says so.
 * Encode the result with parse_special so the markers become their control tokens. */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "model/model_internal.h"

bp_status bp_model_chat_format(const bp_model *m, const bp_tokenizer *t, const char *prompt, char *buf, size_t cap,
                               size_t *len, const char **name) {
    if (!m || !prompt || !len || (cap && !buf)) return bp_fail(BP_E_INVAL, "chat format: NULL argument");
    const char *pre, *post, *nm;
    switch (m->arch->chat) {
    case BP_CHAT_GEMMA:
        nm = "gemma", pre = "<start_of_turn>user\n", post = "<end_of_turn>\n<start_of_turn>model\n";
        break;
    case BP_CHAT_CHATML:
        nm = "chatml", pre = "<|im_start|>user\n", post = "<|im_end|>\n<|im_start|>assistant\n";
        break;
    default: {
        static const char hdr[] = "<|start_header_id|>";
        if (t && bp_tokenizer_find(t, hdr, sizeof hdr - 1) != BP_TOKEN_NULL) {
            nm = "llama3", pre = "<|start_header_id|>user<|end_header_id|>\n\n";
            post = "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n";
        } else {
            nm = "llama2", pre = "[INST] ", post = " [/INST]";
        }
    }
    }
    if (name) *name = nm;
    int n = snprintf(buf, cap, "%s%s%s", pre, prompt, post);
    if (n < 0) return bp_fail(BP_E_INVAL, "chat format: cannot format");
    *len = (size_t)n;
    if ((size_t)n >= cap)
        return bp_fail(BP_E_INVAL, "chat format: %d bytes do not fit in %zu (ask with cap 0)", n + 1, cap);
    return BP_OK;
}
