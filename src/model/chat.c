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
 *   phi3     <|user|>\n{p}<|end|>\n<|assistant|>\n                                        (Phi-3)
 *   harmony  <|start|>user<|message|>{p}<|end|><|start|>assistant                  (gpt-oss)
 *            (llama.cpp's built-in OPENAI_MOE template: an assistant turn closes with <|return|>,
 *            the others with <|end|>; the model writes its channel and message after the opening)
 *
 * A conversation (bp_model_chat_format_turns) is its turns in that shape, each closed by the
 * family's end-of-turn marker, then the opening of the assistant's turn. Gemma and Llama 2 have
 * no system turn: a system text opens the next user turn, followed by a blank line.
 *
 * BOS is not part of the text: encoding with add_special adds it where the vocabulary says so.
 * Encode the result with parse_special so the markers become their control tokens. */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "model/model_internal.h"

/* The family's markers: a turn is open[role] + text + close, the reply opens with `reply`. */
typedef struct chat_style {
    const char *name, *user, *assistant, *system, *close, *reply;
    bool system_in_user; /* no system turn: its text opens the first user turn */
    const char *assistant_close; /* NULL: close */
} chat_style;

static chat_style style_of(const bp_model *m, const bp_tokenizer *t) {
    switch (m->arch->chat) {
    case BP_CHAT_GEMMA:
        return (chat_style){"gemma", "<start_of_turn>user\n", "<start_of_turn>model\n", NULL, "<end_of_turn>\n",
                            "<start_of_turn>model\n", true, NULL};
    case BP_CHAT_PHI3:
        return (chat_style){"phi3", "<|user|>\n", "<|assistant|>\n", "<|system|>\n", "<|end|>\n", "<|assistant|>\n",
                            false, NULL};
    case BP_CHAT_HARMONY:
        return (chat_style){"harmony", "<|start|>user<|message|>", "<|start|>assistant<|message|>",
                            "<|start|>system<|message|>", "<|end|>", "<|start|>assistant", false, "<|return|>"};
    case BP_CHAT_CHATML:
        return (chat_style){"chatml", "<|im_start|>user\n", "<|im_start|>assistant\n", "<|im_start|>system\n",
                            "<|im_end|>\n", "<|im_start|>assistant\n", false, NULL};
    default: {
        static const char hdr[] = "<|start_header_id|>";
        if (t && bp_tokenizer_find(t, hdr, sizeof hdr - 1) != BP_TOKEN_NULL)
            return (chat_style){"llama3", "<|start_header_id|>user<|end_header_id|>\n\n",
                                "<|start_header_id|>assistant<|end_header_id|>\n\n",
                                "<|start_header_id|>system<|end_header_id|>\n\n", "<|eot_id|>",
                                "<|start_header_id|>assistant<|end_header_id|>\n\n", false, NULL};
        return (chat_style){"llama2", "[INST] ", "", NULL, " [/INST]", "", true, NULL};
    }
    }
}

/* Append s to buf[*at..cap) as far as it fits; *at counts every byte, fitting or not. */
static void put(char *buf, size_t cap, size_t *at, const char *s) {
    size_t n = strlen(s);
    if (*at < cap) memcpy(buf + *at, s, *at + n < cap ? n : cap - *at);
    *at += n;
}

bp_status bp_model_chat_format_turns(const bp_model *m, const bp_tokenizer *t, const char *const *roles,
                                     const char *const *texts, size_t n, char *buf, size_t cap, size_t *len,
                                     const char **name) {
    if (!m || !len || (cap && !buf) || (n && (!roles || !texts))) return bp_fail(BP_E_INVAL, "chat format: NULL argument");
    const chat_style st = style_of(m, t);
    if (name) *name = st.name;
    size_t at = 0;
    const char *pending_system = NULL;
    for (size_t i = 0; i < n; i++) {
        const char *r = roles[i], *x = texts[i];
        if (!r || !x) return bp_fail(BP_E_INVAL, "chat format: turn %zu has no role or text", i);
        if (!strcmp(r, "system") || !strcmp(r, "developer")) {
            if (st.system_in_user) {
                pending_system = x; /* Gemma and Llama 2 have no system turn: it opens the next user turn */
                continue;
            }
            put(buf, cap, &at, st.system);
        } else if (!strcmp(r, "user")) {
            put(buf, cap, &at, st.user);
            if (pending_system) {
                put(buf, cap, &at, pending_system);
                put(buf, cap, &at, "\n\n");
                pending_system = NULL;
            }
        } else if (!strcmp(r, "assistant")) {
            put(buf, cap, &at, st.assistant);
        } else {
            return bp_fail(BP_E_INVAL, "chat format: turn %zu has role '%s' (system, developer, user or assistant)", i, r);
        }
        put(buf, cap, &at, x);
        put(buf, cap, &at, st.assistant_close && !strcmp(r, "assistant") ? st.assistant_close : st.close);
    }
    put(buf, cap, &at, st.reply);
    *len = at;
    if (at >= cap) return bp_fail(BP_E_INVAL, "chat format: %zu bytes do not fit in %zu (ask with cap 0)", at + 1, cap);
    buf[at] = 0;
    return BP_OK;
}

bp_status bp_model_chat_format(const bp_model *m, const bp_tokenizer *t, const char *prompt, char *buf, size_t cap,
                               size_t *len, const char **name) {
    if (!prompt) return bp_fail(BP_E_INVAL, "chat format: NULL argument");
    const char *role = "user";
    return bp_model_chat_format_turns(m, t, &role, &prompt, 1, buf, cap, len, name);
}
