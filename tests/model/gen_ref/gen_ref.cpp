// Reference vectors for the model tests, computed by llama.cpp through its public API (llama.h).
// Built and run by gen_ref.sh against a llama.cpp tree outside the repository; only this program
// and its outputs are committed. It uses nothing but llama.h: no llama.cpp code is copied here.
//
//   gen_ref --model M.gguf --out PREFIX [--threads N] [--ctx N] [--kv-kind f16|q8_0|...]
//           [--flash-attn on|off|auto] [--logits-ids "1 2 3" | --logits-text TEXT] [--n-pos 32] [--subset 512] [--topk 64]
//           (--n-pos 0: every token of the text; --subset 0: every vocabulary entry)
//           [--prompts FILE --n-gen 64] [--ppl-text FILE --ppl-ctx 512 --ppl-chunks 8]
//
// Outputs (all little-endian; tests/model/README.md describes the formats):
//   PREFIX.logits.bin  the logits of the first n-pos positions of one batch: per position the
//                      value at a fixed random subset of vocabulary ids plus the top-k ids
//                      (every id when the vocabulary is at most subset + topk entries)
//   PREFIX.greedy.txt  per prompt: its token ids, llama.cpp's greedy continuation, and at each
//                      step the margin between the best and second-best logit (to explain a
//                      divergence by a near-tie)
//   PREFIX.ppl_ids.txt the text's token ids exactly as llama-perplexity makes them
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"

static void die(const char *msg) {
    fprintf(stderr, "gen_ref: %s\n", msg);
    exit(1);
}

static std::string read_file(const std::string &path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) die(("cannot read " + path).c_str());
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

static std::vector<llama_token> tokenize(const llama_vocab *vocab, const std::string &text, bool add_special) {
    int n = -llama_tokenize(vocab, text.data(), (int32_t)text.size(), nullptr, 0, add_special, false);
    std::vector<llama_token> out(n);
    if (llama_tokenize(vocab, text.data(), (int32_t)text.size(), out.data(), n, add_special, false) != n)
        die("tokenize failed");
    return out;
}

// Evaluate tokens [0, n) at positions [0, n) in batches of at most n_batch, logits for every
// position when want_all, else only the last. Returns false on a decode failure.
static bool eval(llama_context *ctx, const llama_token *tok, int n, int pos0, bool want_all) {
    llama_batch b = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) {
        b.token[i] = tok[i];
        b.pos[i] = pos0 + i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = want_all || i == n - 1;
    }
    b.n_tokens = n;
    int rc = llama_decode(ctx, b);
    llama_batch_free(b);
    return rc == 0;
}

static ggml_type kv_type(const std::string &s) {
    if (s == "f16") return GGML_TYPE_F16;
    if (s == "f32") return GGML_TYPE_F32;
    if (s == "bf16") return GGML_TYPE_BF16;
    if (s == "q8_0") return GGML_TYPE_Q8_0;
    if (s == "q4_0") return GGML_TYPE_Q4_0;
    if (s == "q4_1") return GGML_TYPE_Q4_1;
    if (s == "q5_0") return GGML_TYPE_Q5_0;
    if (s == "q5_1") return GGML_TYPE_Q5_1;
    if (s == "iq4_nl") return GGML_TYPE_IQ4_NL;
    die(("unknown kv kind " + s).c_str());
    return GGML_TYPE_F16;
}

// A 64-bit LCG (Knuth's MMIX constants): the subset must be reproducible from the seed alone.
static uint64_t lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 33;
}

int main(int argc, char **argv) {
    std::string model_path, out, kv = "f16", logits_ids, logits_text, prompts, ppl_text, fa = "auto";
    int threads = 2, n_ctx = 0, n_pos = 32, subset = 512, topk = 64, n_gen = 64, ppl_ctx = 512, ppl_chunks = 8;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) die(("missing value after " + a).c_str());
            return argv[++i];
        };
        if (a == "--model") model_path = next();
        else if (a == "--out") out = next();
        else if (a == "--threads") threads = atoi(next().c_str());
        else if (a == "--ctx") n_ctx = atoi(next().c_str());
        else if (a == "--kv-kind") kv = next();
        else if (a == "--flash-attn") fa = next();
        else if (a == "--logits-ids") logits_ids = next();
        else if (a == "--logits-text") logits_text = next();
        else if (a == "--n-pos") n_pos = atoi(next().c_str());
        else if (a == "--subset") subset = atoi(next().c_str());
        else if (a == "--topk") topk = atoi(next().c_str());
        else if (a == "--prompts") prompts = next();
        else if (a == "--n-gen") n_gen = atoi(next().c_str());
        else if (a == "--ppl-text") ppl_text = next();
        else if (a == "--ppl-ctx") ppl_ctx = atoi(next().c_str());
        else if (a == "--ppl-chunks") ppl_chunks = atoi(next().c_str());
        else die(("unknown argument " + a).c_str());
    }
    if (model_path.empty() || out.empty()) die("need --model and --out");

    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model *model = llama_model_load_from_file(model_path.c_str(), mp);
    if (!model) die("cannot load the model");
    const llama_vocab *vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);

    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_ctx > 0 ? n_ctx : 512;
    cp.n_batch = cp.n_ctx;
    cp.n_ubatch = cp.n_ctx;
    cp.n_threads = threads;
    cp.n_threads_batch = threads;
    cp.type_k = kv_type(kv);
    cp.type_v = kv_type(kv);
    cp.no_perf = true;
    cp.flash_attn_type = fa == "on" ? LLAMA_FLASH_ATTN_TYPE_ENABLED
                       : fa == "off" ? LLAMA_FLASH_ATTN_TYPE_DISABLED : LLAMA_FLASH_ATTN_TYPE_AUTO;
    llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) die("cannot create the context");
    fprintf(stderr, "gen_ref: n_vocab %d, n_ctx %u, kv %s, flash_attn %s\n", n_vocab, llama_n_ctx(ctx), kv.c_str(),
            llama_flash_attn_type_name(cp.flash_attn_type));

    // ---- logits of the first positions of one batch ----
    if (!logits_ids.empty() || !logits_text.empty()) {
        std::vector<llama_token> ids;
        if (!logits_ids.empty()) {
            std::istringstream ss(logits_ids);
            int v;
            while (ss >> v) ids.push_back(v);
        } else {
            ids = tokenize(vocab, logits_text, true);
        }
        if (n_pos == 0) n_pos = (int)ids.size(); // --n-pos 0: every token of the text
        if ((int)ids.size() < n_pos) die("fewer tokens than --n-pos");
        if (n_pos > (int)llama_n_ctx(ctx)) die("--n-pos is over --ctx");
        ids.resize(n_pos);
        llama_memory_clear(llama_get_memory(ctx), true);
        if (!eval(ctx, ids.data(), n_pos, 0, true)) die("decode failed (logits)");
        // The subset: `subset` distinct ids drawn by the LCG from seed 1; every id when the
        // vocabulary is small enough to store whole, or with --subset 0 (verify --peer's files).
        std::vector<int> sub;
        bool whole = subset == 0 || n_vocab <= subset + topk;
        if (whole) {
            for (int v = 0; v < n_vocab; v++) sub.push_back(v);
        } else {
            uint64_t s = 1;
            std::vector<char> taken(n_vocab, 0);
            while ((int)sub.size() < subset) {
                int v = (int)(lcg(&s) % (uint64_t)n_vocab);
                if (!taken[v]) taken[v] = 1, sub.push_back(v);
            }
        }
        FILE *f = fopen((out + ".logits.bin").c_str(), "wb");
        if (!f) die("cannot write logits");
        // Header: magic, n_vocab, n_pos, entries per position; then the n_pos token ids; then
        // per position `entries` (id, value) pairs as int32 + float32.
        int entries = whole ? n_vocab : subset + topk;
        fwrite("BPLG", 1, 4, f);
        int32_t hdr[3] = {n_vocab, n_pos, entries};
        fwrite(hdr, 4, 3, f);
        fwrite(ids.data(), 4, ids.size(), f);
        for (int p = 0; p < n_pos; p++) {
            const float *lg = llama_get_logits_ith(ctx, p);
            std::vector<int> e = sub;
            if (!whole) {
                std::vector<int> order(n_vocab);
                for (int v = 0; v < n_vocab; v++) order[v] = v;
                std::partial_sort(order.begin(), order.begin() + topk, order.end(),
                                  [&](int a, int b) { return lg[a] > lg[b] || (lg[a] == lg[b] && a < b); });
                e.insert(e.end(), order.begin(), order.begin() + topk);
            }
            for (int v : e) {
                int32_t id = v;
                float val = lg[v];
                fwrite(&id, 4, 1, f);
                fwrite(&val, 4, 1, f);
            }
        }
        fclose(f);
        fprintf(stderr, "gen_ref: wrote %s.logits.bin (%d positions x %d entries)\n", out.c_str(), n_pos, entries);
    }

    // ---- greedy continuations ----
    if (!prompts.empty()) {
        std::ifstream pf(prompts);
        if (!pf) die("cannot read prompts");
        FILE *f = fopen((out + ".greedy.txt").c_str(), "w");
        if (!f) die("cannot write greedy");
        fprintf(f, "# llama.cpp greedy continuations: prompt line, prompt ids (BOS added as the vocabulary says),\n"
                   "# %d generated ids (prefill in one batch, then one token per decode), per step the\n"
                   "# margin between the best and second-best logit, and the generated text\n", n_gen);
        std::string line;
        while (std::getline(pf, line)) {
            if (line.empty() || line[0] == '#') continue;
            std::vector<llama_token> ids = tokenize(vocab, line, true);
            llama_memory_clear(llama_get_memory(ctx), true);
            if (!eval(ctx, ids.data(), (int)ids.size(), 0, false)) die("decode failed (prompt)");
            std::vector<llama_token> gen;
            std::vector<float> margin;
            int pos = (int)ids.size();
            for (int s = 0; s < n_gen; s++) {
                const float *lg = llama_get_logits_ith(ctx, -1);
                int best = 0, second = -1;
                for (int v = 1; v < n_vocab; v++) {
                    if (lg[v] > lg[best]) second = best, best = v;
                    else if (second < 0 || lg[v] > lg[second]) second = v;
                }
                gen.push_back(best);
                margin.push_back(lg[best] - lg[second]);
                llama_token t = best;
                if (!eval(ctx, &t, 1, pos++, false)) die("decode failed (generate)");
            }
            fprintf(f, "prompt %s\nids", line.c_str());
            for (auto t : ids) fprintf(f, " %d", t);
            fprintf(f, "\ngen");
            for (auto t : gen) fprintf(f, " %d", t);
            fprintf(f, "\nmargin");
            for (auto m : margin) fprintf(f, " %.4f", m);
            // the generated text, each token's piece as llama_token_to_piece gives it, with
            // backslash and newline escaped (\\, \n) so it stays one line
            fprintf(f, "\ntext ");
            for (auto t : gen) {
                char piece[256];
                int n = llama_token_to_piece(vocab, t, piece, sizeof piece, 0, false);
                for (int i = 0; i < n; i++) {
                    if (piece[i] == '\\') fputs("\\\\", f);
                    else if (piece[i] == '\n') fputs("\\n", f);
                    else fputc(piece[i], f);
                }
            }
            fprintf(f, "\n");
        }
        fclose(f);
        fprintf(stderr, "gen_ref: wrote %s.greedy.txt\n", out.c_str());
    }

    // ---- the perplexity text's token ids, as llama-perplexity makes them ----
    if (!ppl_text.empty()) {
        std::vector<llama_token> ids = tokenize(vocab, read_file(ppl_text), true);
        size_t keep = std::min(ids.size(), (size_t)ppl_ctx * (size_t)ppl_chunks);
        FILE *f = fopen((out + ".ppl_ids.txt").c_str(), "w");
        if (!f) die("cannot write ppl ids");
        fprintf(f, "# %zu of the text's %zu token ids (add_special, no special parsing)\n", keep, ids.size());
        for (size_t i = 0; i < keep; i++) fprintf(f, "%d%c", ids[i], (i + 1) % 16 ? ' ' : '\n');
        fprintf(f, "\n");
        fclose(f);
    }

    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
