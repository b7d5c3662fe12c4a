// seqprob benchmarks: per-token log-probabilities from llama.cpp, for bench_llamacpp.py's
// agreement check (llama-perplexity prints only a perplexity; this prints every token's).
//
//   llamacpp-logprobs MODEL.gguf IDS.i32 OUT.f64 THREADS [RUNS]
//
// IDS.i32: the token ids, int32 little-endian, fed as they are (no tokenizer, no BOS added),
// one sequence of T ids in one batch with logits for every position. OUT.f64: T-1 float64,
// entry t = log softmax(logits at position t)[ids[t+1]], the log-softmax taken in double.
// RUNS > 0: the same decode (KV cache cleared first) RUNS more times, each timed by the wall
// clock around llama_decode + llama_synchronize, printed as one line "decode_s: t1 t2 ...".
// This is the scoring call alone: llama-perplexity's "prompt eval time" counts only one of
// the two decodes its strided mode makes of a 1,024-token chunk, about half of the work.
// Built by bench_llamacpp.py (or by hand, see benchmarks/README.md) against the static
// libraries of a llama.cpp build: never part of seqprob.
#include "llama.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char ** argv) {
    if (argc != 5 && argc != 6) {
        std::fprintf(stderr, "usage: %s MODEL.gguf IDS.i32 OUT.f64 THREADS [RUNS]\n", argv[0]);
        return 2;
    }
    std::FILE * f = std::fopen(argv[2], "rb");
    if (!f) { std::perror(argv[2]); return 1; }
    std::vector<llama_token> ids;
    int32_t v;
    while (std::fread(&v, sizeof v, 1, f) == 1) ids.push_back(v);
    std::fclose(f);
    const int T = (int) ids.size();
    if (T < 2) { std::fprintf(stderr, "need at least 2 ids\n"); return 1; }

    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) { std::fprintf(stderr, "cannot load %s\n", argv[1]); return 1; }
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = T; cp.n_batch = T; cp.n_ubatch = T;
    cp.n_threads = cp.n_threads_batch = std::atoi(argv[4]);
    cp.type_k = cp.type_v = GGML_TYPE_F32;  // llama.cpp's default KV cache is F16
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) { std::fprintf(stderr, "cannot make a context\n"); return 1; }
    const int V = llama_vocab_n_tokens(llama_model_get_vocab(model));

    llama_batch batch = llama_batch_init(T, 0, 1);
    for (int t = 0; t < T; ++t) {
        batch.token[t] = ids[t]; batch.pos[t] = t; batch.n_seq_id[t] = 1;
        batch.seq_id[t][0] = 0; batch.logits[t] = 1;
    }
    batch.n_tokens = T;
    if (llama_decode(ctx, batch) != 0) { std::fprintf(stderr, "llama_decode failed\n"); return 1; }

    std::vector<double> out(T - 1);
    for (int t = 0; t + 1 < T; ++t) {
        const float * row = llama_get_logits_ith(ctx, t);
        double mx = row[0];
        for (int j = 1; j < V; ++j) mx = row[j] > mx ? row[j] : mx;
        double s = 0;
        for (int j = 0; j < V; ++j) s += std::exp(row[j] - mx);
        out[t] = row[ids[t + 1]] - mx - std::log(s);
    }
    const int runs = argc == 6 ? std::atoi(argv[5]) : 0;
    if (runs > 0) std::printf("decode_s:");
    for (int r = 0; r < runs; ++r) {
        llama_memory_clear(llama_get_memory(ctx), true);
        const auto t0 = std::chrono::steady_clock::now();
        if (llama_decode(ctx, batch) != 0) { std::fprintf(stderr, "llama_decode failed\n"); return 1; }
        llama_synchronize(ctx);
        std::printf(" %.6f", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    if (runs > 0) std::printf("\n");
    std::FILE * o = std::fopen(argv[3], "wb");
    if (!o) { std::perror(argv[3]); return 1; }
    std::fwrite(out.data(), sizeof(double), out.size(), o);
    std::fclose(o);
    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
