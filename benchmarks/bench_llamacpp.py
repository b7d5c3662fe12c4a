"""llama.cpp as a benchmark anchor: seqprob vs llama.cpp's own CPU binaries on F32 GGUF copies of
the same random-weight checkpoints (llama.cpp is a benchmark-only tool, never a dependency).

Run (the llama.cpp binaries built as benchmarks/README.md says; the reference Python needs
torch, transformers, tokenizers and the ``gguf`` package of the same llama.cpp tree)::

    LLAMACPP_BIN=/tmp/llamacpp/bin PYTHONPATH=. python benchmarks/bench_llamacpp.py \
        [--threads 1 2] [--runs 7] [--pairs 3] [--models smollm2-135m gpt2-124m] \
        [--reference-python /tmp/benchenv/bin/python]
    python benchmarks/bench_llamacpp.py --quick          # tiny shapes: a smoke run
    python -m benchmarks --only llamacpp                 # the suite's rows

Checkpoints: a Llama of SmolLM2-135M's shape (30 layers, d 576, 9 heads, 3 kv heads, F 1536,
vocabulary 49,152, tied, RoPE base 100,000) and a GPT-2-124M-shape ``GPT2LMHeadModel``, random
weights (seed 0), written by a child with ``save_pretrained`` (safetensors, float32) together with
a small byte-level BPE tokenizer (256 bytes + 676 letter pairs + ``<|endoftext|>``; the converter
pads the vocabulary to the model's with ``[PAD]`` tokens), then converted with llama.cpp's
``convert_hf_to_gguf.py --outtype f32``. The converter refuses a BPE pre-tokenizer it does not
know by hash; the wrapper here declares it "gpt-2" (the regex this tokenizer really uses).

Per model, each side alone in its own fresh process, one after the other, never at once; same
threads (``OMP/OPENBLAS/MKL_NUM_THREADS`` + threadpoolctl for seqprob, ``-t`` for llama.cpp):

* agreement (untimed, once): seqprob ``token_logprobs`` vs llama.cpp's per-token log-probs of
  the same 1,024 random ids over the whole vocabulary, from ``llamacpp-logprobs`` (a 70-line
  C++ program, ``benchmarks/llamacpp_logprobs.cpp``, compiled against the build's static
  libraries: one batch, logits at every position, log-softmax in double); mean |diff| <= 1e-4.
  Both are also compared with transformers in float64 on the same checkpoint (a reference
  child), which says whose rounding a difference is. Also llama-perplexity's own perplexity
  over the timed chunk vs exp(-mean) of seqprob's.
* scoring 1 x 1,024, all positions (the call alone): ``llamacpp-logprobs ... THREADS RUNS``, one
  ``llama_decode`` of the 1,024 ids with logits at every position, wall-clocked around
  ``llama_decode`` + ``llama_synchronize`` (KV cache cleared first), RUNS times after the
  untimed agreement decode, vs ``model.token_logprobs(ids)`` (forward + log-softmax) on the same
  ids. llama.cpp's figure leaves out its log-softmax. (llama-perplexity's ``prompt eval time``
  is not used: in the strided mode it splits the chunk into two decodes, 513 + 511 tokens, and
  the figure it prints covers only one of them, half the work: 4.8 s where the chunk's pass
  took 9.4 s.)
* "cold": ``llama-perplexity -c 513 --ppl-stride 1023 --chunks 1`` (one chunk of 513 + 1023/2 =
  1,024 tokens, logits at every position, all 1,023 next tokens scored), the process wall
  including load, vs seqprob's import + ``from_hf`` + the first call; one process per run after
  one untimed one. ``model.token_logprobs`` reads exactly the ids llama.cpp read
  (``llama-tokenize`` of the same text).
* greedy decode 128 tokens: ``llama-bench -p 0 -n 128`` (tg128: 128 one-token decodes; its
  samples) vs seqprob ``start`` on 1 id + 127 ``step`` with argmax (128 one-token forwards).
* peak RSS: seqprob's child VmHWM; the llama.cpp binaries run under the harness's small wrapper
  (``_harness.own_peak_command``) whose children's ``ru_maxrss`` is theirs. File-backed pages
  count: llama.cpp maps the GGUF, seqprob maps the safetensors.
* llama-perplexity and the agreement check run with an F32 KV cache (`-ctk f32 -ctv f32`; the
  default is F16); llama-bench accepts no f32 cache type, so its decode keeps the F16 cache.

Ratios: llama.cpp time / seqprob time (> 1: seqprob faster), per pair, and their spread.
Without the binaries (``--bin`` / ``LLAMACPP_BIN`` / /tmp/llamacpp/bin) every row is "not run".
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import string
import subprocess
import sys
import time
from pathlib import Path

T0 = time.perf_counter()  # the seqprob child's "cold" figure counts from here (imports included)
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _harness as H  # noqa: E402

SUITE = {"order": 60, "group": "llamacpp", "about": "llama.cpp anchor (F32 GGUF, same random weights): score 1x1024 "
         "all positions (one llama_decode; llama-perplexity for load + first call) and greedy decode 128 (llama-bench "
         "tg128), SmolLM2-135M and GPT-2-124M shapes, log-prob agreement with a float64 reference; needs LLAMACPP_BIN"}
MODELS = {
    "smollm2-135m": ("llama", dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                                   num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=2048,
                                   rms_norm_eps=1e-5, tie_word_embeddings=True, rope_theta=100000.0,
                                   bos_token_id=932, eos_token_id=932)),
    "gpt2-124m": ("gpt2", dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12, n_ctx=1024,
                               bos_token_id=932, eos_token_id=932)),
}
QUICK = {
    "smollm2-135m": ("llama", dict(MODELS["smollm2-135m"][1], hidden_size=64, intermediate_size=128,
                                   num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                   vocab_size=1024, max_position_embeddings=256)),
    "gpt2-124m": ("gpt2", dict(MODELS["gpt2-124m"][1], n_embd=64, n_layer=2, n_head=4, vocab_size=1024,
                               n_positions=256, n_ctx=256)),
}
LABELS = {"smollm2-135m": "SmolLM2-135M shape", "gpt2-124m": "GPT-2-124M shape"}
BINARIES = ("llama-perplexity", "llama-bench", "llama-tokenize")
DUMPER = "llamacpp-logprobs"
# llama.cpp keeps its KV cache in F16 by default: with it the SmolLM2 shape's log-probs differ from
# seqprob's float32 by 1.2e-4 on average; F32 keys and values make the comparison like for like
F32_CACHE = ("-ctk", "f32", "-ctv", "f32")


def shapes(quick: bool) -> tuple:
    """(tokens scored, tokens decoded)."""
    return (256, 16) if quick else (1024, 128)


# ----------------------------------------------------------------------------- reference children
def bytes_to_unicode() -> dict:
    """GPT-2's byte -> printable character map (byte-level BPE)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def write_checkpoint(args) -> dict:
    """The random-weight HF checkpoint and its tokenizer (a child on the reference Python)."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    arch, spec = (QUICK if args.quick else MODELS)[args.model]
    torch.manual_seed(0)
    if arch == "llama":
        model = LlamaForCausalLM(LlamaConfig(**spec))
    else:
        model = GPT2LMHeadModel(GPT2Config(**spec, activation_function="gelu_new"))
    model.eval().save_pretrained(args.folder, safe_serialization=True)
    b2u = bytes_to_unicode()
    vocab, merges = {b2u[b]: b for b in range(256)}, []
    for a in string.ascii_lowercase:
        for c in string.ascii_lowercase:
            merges.append((a, c))
            vocab[a + c] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)  # 932
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>",
                            eos_token="<|endoftext|>").save_pretrained(args.folder)
    return {"params": sum(p.numel() for p in model.parameters())}


def float64_logprobs(args) -> dict:
    """transformers in float64 on the checkpoint: log P(ids[t+1] | ids[:t+1]) (a reference child)."""
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(args.folder, dtype=torch.float64).eval()
    ids = torch.from_numpy(np.fromfile(args.ids, dtype=np.int32).astype(np.int64))[None]
    with torch.no_grad():
        lp = torch.log_softmax(model(ids).logits[0, :-1].double(), dim=-1)
    np.save(args.out, lp.gather(1, ids[0, 1:, None])[:, 0].numpy())
    return {"n": int(ids.shape[1] - 1)}


# convert_hf_to_gguf.py, with the BPE pre-tokenizer declared "gpt-2" (it refuses unknown hashes);
# the Llama converter imports sentencepiece before it looks for a tokenizer.model: without one
# (as here) it goes straight to the tokenizer.json path, sentencepiece installed or not
_CONVERT = """import runpy, sys
src = sys.argv[1]
sys.path.insert(0, src)
import conversion.base as base
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "gpt-2"
_spm = base.TextModel._create_vocab_sentencepiece
def _create_vocab_sentencepiece(self):
    if not (self.dir_model / "tokenizer.model").is_file():
        raise FileNotFoundError(self.dir_model / "tokenizer.model")
    return _spm(self)
base.TextModel._create_vocab_sentencepiece = _create_vocab_sentencepiece
sys.argv = [src + "/convert_hf_to_gguf.py", *sys.argv[2:]]
runpy.run_path(src + "/convert_hf_to_gguf.py", run_name="__main__")
"""


# ----------------------------------------------------------------------------- seqprob children
def seqprob_child(args) -> dict:
    import numpy as np

    from seqprob.gpt import GPT

    info = H.limit_threads(args.threads[0], torch_side=False)
    t0 = time.perf_counter()
    model = GPT.from_hf(args.folder, dtype="float32")
    res = {**info, "load": time.perf_counter() - t0}
    ids = np.fromfile(args.ids, dtype=np.int32).astype(np.int64)
    if args.task == "check":
        np.save(args.out, model.token_logprobs(ids).astype(np.float64))
    elif args.task == "score":
        model.token_logprobs(ids)
        res["cold"] = time.perf_counter() - T0  # imports + from_hf + the first call
        res["score"] = H.timeit(lambda: model.token_logprobs(ids), args.runs, args.warmups)
        lp = model.token_logprobs(ids)
        res["ppl"] = float(np.exp(-lp.mean()))
    else:
        def decode():
            state = model.start(ids[:1])
            for _ in range(args.new_tokens - 1):
                state = model.step(state, int(np.argmax(state.logprobs)))
        res["decode"] = H.timeit(decode, args.runs, args.warmups)
    return res


# ----------------------------------------------------------------------------- parent: llama.cpp
def find_bin(explicit: str | None = None) -> tuple:
    """(folder with the binaries, None) or (None, why not)."""
    folder = Path(explicit or os.environ.get("LLAMACPP_BIN") or "/tmp/llamacpp/bin")
    missing = [b for b in BINARIES if not (folder / b).is_file()]
    if missing:
        return None, (f"llama.cpp binaries missing in {folder}: {', '.join(missing)} (build them as "
                      "benchmarks/README.md says and set LLAMACPP_BIN or --bin)")
    return folder, None


def llama_source(bin_dir: Path) -> Path | None:
    """The llama.cpp source tree of a cmake build (its CMakeCache), for the converter and headers."""
    cache = bin_dir.parent / "CMakeCache.txt"
    if cache.is_file():
        for line in cache.read_text(errors="replace").splitlines():
            if line.startswith("CMAKE_HOME_DIRECTORY:"):
                return Path(line.split("=", 1)[1])
    src = os.environ.get("LLAMACPP_SRC")
    return Path(src) if src else None


def build_dumper(bin_dir: Path, src: Path) -> Path:
    """Compile benchmarks/llamacpp_logprobs.cpp against the build's static libraries (once)."""
    exe = bin_dir / DUMPER
    cpp = HERE / "llamacpp_logprobs.cpp"
    if exe.is_file() and exe.stat().st_mtime >= cpp.stat().st_mtime:
        return exe
    build = bin_dir.parent
    libs = [build / "src" / "libllama.a", build / "ggml" / "src" / "libggml.a",
            build / "ggml" / "src" / "libggml-cpu.a", build / "ggml" / "src" / "libggml-base.a"]
    missing = [str(p) for p in libs if not p.is_file()]
    if missing:
        raise RuntimeError(f"static llama.cpp libraries missing (configure with -DBUILD_SHARED_LIBS=OFF): {missing}")
    cmd = ["g++", "-O2", "-std=c++17", f"-I{src / 'include'}", f"-I{src / 'ggml' / 'include'}", str(cpp),
           "-o", str(exe), "-Wl,--start-group", *map(str, libs), "-Wl,--end-group", "-fopenmp", "-lpthread", "-ldl"]
    subprocess.run(cmd, check=True)
    return exe


def run_measured(cmd: list, threads: int, cpus: str | None = None) -> tuple:
    """Run a llama.cpp binary under the own-peak wrapper: (stdout+stderr, wall s, peak RSS MiB)."""
    cmd = H.own_peak_command(cmd)
    if cpus:
        cmd = ["taskset", "-c", cpus, *cmd]
    proc = subprocess.run(cmd, env=H.child_env(threads), capture_output=True, text=True)
    peak = H.own_peak_result(proc.stderr)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
        raise RuntimeError(f"failed ({proc.returncode}): {' '.join(map(str, cmd))}")
    return proc.stdout + proc.stderr, peak["wall"], peak["maxrss_kib"] / 1024


def perplexity_cmd(bin_dir, gguf, text, threads, T) -> list:
    # --ppl-stride S: context c + S/2 = T (a multiple of 256: llama.cpp pads n_ctx), all T-1 next
    # tokens scored; the batch is capped at c, so the chunk goes in two decodes (c, T - c)
    half = (T - 1) // 2
    return [bin_dir / "llama-perplexity", "-m", gguf, "-f", text, "-t", threads, "-c", T - half,
            "--ppl-stride", T - 1, "--chunks", 1, "-b", T, "-ub", T, "-lv", 4, *F32_CACHE]  # -lv 4: the perf lines


def llama_score_call(dumper, m, threads, runs, folder, cpus) -> dict:
    """One llamacpp-logprobs process: an untimed decode of the 1,024 ids, then ``runs`` timed
    ones (the call alone: forward + logits at every position), and the process' peak RSS."""
    out, _, peak = run_measured([dumper, m["gguf"], m["ids"], folder / "score.f64", threads, runs], threads, cpus)
    line = [x for x in out.splitlines() if x.startswith("decode_s:")]
    times = [float(x) for x in line[-1].split()[1:]] if line else []
    if len(times) != runs:
        raise RuntimeError(f"llamacpp-logprobs output not understood:\n{out[-2000:]}")
    return {"median": statistics.median(times), "min": min(times), "max": max(times), "peak_rss_mib": peak}


def llama_score(bin_dir, gguf, text, threads, T, runs, cpus) -> dict:
    """One untimed llama-perplexity process, then ``runs`` timed ones: process wall incl. load,
    peak RSS, and the perplexity of the chunk."""
    walls, rss, ppl = [], [], None
    for i in range(runs + 1):
        out, wall, peak = run_measured(perplexity_cmd(bin_dir, gguf, text, threads, T), threads, cpus)
        m = re.search(r"prompt eval time =\s*([0-9.]+) ms /\s*(\d+) tokens", out)
        p = re.search(r"\[1\]([0-9.]+)", out)
        if not m or not p or int(m.group(2)) != T:
            raise RuntimeError(f"llama-perplexity output not understood:\n{out[-2000:]}")
        ppl = float(p.group(1))
        if i:
            walls.append(wall)
            rss.append(peak)
    stat = lambda xs: {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}  # noqa: E731
    return {"cold": stat(walls), "peak_rss_mib": max(rss), "ppl": ppl}


def llama_decode(bin_dir, gguf, threads, n_new, runs, cpus) -> dict:
    out, _, peak = run_measured([bin_dir / "llama-bench", "-m", gguf, "-p", 0, "-n", n_new, "-t", threads,
                                 "-r", runs, "-o", "json"], threads, cpus)  # its -ctk takes no f32: F16 KV
    start = out.index("[")
    rows = json.JSONDecoder().raw_decode(out[start:])[0]
    ns = [x / 1e9 for x in rows[0]["samples_ns"]]
    return {"decode": {"median": statistics.median(ns), "min": min(ns), "max": max(ns)}, "peak_rss_mib": peak,
            "build": f"{rows[0].get('build_commit')} ({rows[0].get('cpu_info')}, {rows[0].get('backends')})"}


def tokenize(bin_dir, gguf, text) -> list:
    out = subprocess.run([bin_dir / "llama-tokenize", "-m", gguf, "-f", text, "--ids", "--log-disable"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


# ----------------------------------------------------------------------------- parent: per model
def prepare(name: str, folder: Path, opts, bin_dir: Path, src: Path) -> dict:
    """Write the checkpoint (a reference child), convert it, write the text and both id files."""
    import numpy as np

    T, _ = shapes(opts.quick)
    hf, gguf = folder / name, folder / f"{name}-f32.gguf"
    made = H.run_child(__file__, ["--side", "write", "--model", name, "--folder", hf,
                                  *(["--quick"] if opts.quick else [])], 1, python=opts.reference_python)
    conv = subprocess.run([opts.reference_python, "-c", _CONVERT, src, hf, "--outtype", "f32", "--outfile", gguf],
                          capture_output=True, text=True, env=H.child_env(2))
    if conv.returncode != 0:
        raise RuntimeError(f"convert_hf_to_gguf.py failed:\n{conv.stderr[-3000:]}")
    rng = np.random.default_rng(1)
    words = ["".join(rng.choice(list(string.ascii_lowercase), rng.integers(1, 9))) for _ in range(2 * T)]
    text = folder / f"{name}.txt"
    text.write_text(" ".join(words))  # no final newline: llama-tokenize reads the file verbatim
    ids = tokenize(bin_dir, gguf, text)
    if len(ids) < 2 * T:
        raise RuntimeError(f"the text gives only {len(ids)} tokens, {2 * T} needed")
    np.asarray(ids[:T], np.int32).tofile(folder / f"{name}.ids")
    vocab = (QUICK if opts.quick else MODELS)[name][1]
    vocab = vocab.get("vocab_size")
    np.random.default_rng(2).integers(0, vocab, T).astype(np.int32).tofile(folder / f"{name}.check.ids")
    return {"hf": hf, "gguf": gguf, "text": text, "ids": folder / f"{name}.ids",
            "check_ids": folder / f"{name}.check.ids", "params": made["params"],
            "gguf_mib": gguf.stat().st_size / 2 ** 20}


def seqprob_args(opts, m, task, threads, out=None) -> list:
    _, n_new = shapes(opts.quick)
    return ["--side", "seqprob", "--task", task, "--threads", threads, "--runs", opts.runs, "--warmups",
            opts.warmups, "--folder", m["hf"], "--ids", m["check_ids"] if task == "check" else m["ids"],
            "--new-tokens", n_new, *(["--out", out] if out else [])]


def agreement(opts, m, dumper: Path, threads: int) -> dict:
    import numpy as np

    out = opts.folder / "check.npy"
    H.run_child(__file__, seqprob_args(opts, m, "check", threads, out), threads, opts.keep_openblas_env, opts.cpus)
    ours = np.load(out)
    ref_file = opts.folder / "check.f64"
    subprocess.run([str(x) for x in (dumper, m["gguf"], m["check_ids"], ref_file, threads)], env=H.child_env(threads),
                   capture_output=True, check=True)
    theirs = np.fromfile(ref_file, dtype=np.float64)
    exact_file = opts.folder / "check64.npy"
    H.run_child(__file__, ["--side", "f64", "--folder", m["hf"], "--ids", m["check_ids"], "--out", exact_file],
                threads, python=opts.reference_python)
    exact = np.load(exact_file)
    diff = np.abs(ours - theirs)
    return {"mean": float(diff.mean()), "max": float(diff.max()), "n": int(diff.size),
            "seqprob_f64": float(np.abs(ours - exact).mean()), "llamacpp_f64": float(np.abs(theirs - exact).mean())}


def run_model(name: str, opts, bin_dir: Path, src: Path, dumper: Path) -> dict:
    T, n_new = shapes(opts.quick)
    m = prepare(name, opts.folder, opts, bin_dir, src)
    print(f"{LABELS[name]}: {m['params']:,} parameters, F32 GGUF {m['gguf_mib']:,.0f} MiB", flush=True)
    check = agreement(opts, m, dumper, max(opts.threads))
    print(f"  agreement on {check['n']} random ids: mean |log-prob diff| {check['mean']:.2e}, max {check['max']:.2e}; "
          f"mean vs transformers float64: seqprob {check['seqprob_f64']:.2e}, llama.cpp {check['llamacpp_f64']:.2e}",
          flush=True)
    results = {thr: [] for thr in opts.threads}
    for rep in range(opts.repeats):
        for thr in opts.threads:
            s = H.run_child(__file__, seqprob_args(opts, m, "score", thr), thr, opts.keep_openblas_env, opts.cpus)
            r = llama_score(bin_dir, m["gguf"], m["text"], thr, T, opts.runs, opts.cpus)
            rc = llama_score_call(dumper, m, thr, opts.runs, opts.folder, opts.cpus)
            sd = H.run_child(__file__, seqprob_args(opts, m, "decode", thr), thr, opts.keep_openblas_env, opts.cpus)
            rd = llama_decode(bin_dir, m["gguf"], thr, n_new, opts.runs, opts.cpus)
            pair = ({"score": s["score"], "cold": {"median": s["cold"]}, "decode": sd["decode"], "ppl": s["ppl"],
                     "rss_score": s["peak_rss_mib"], "rss_cold": s["peak_rss_mib"], "rss_decode": sd["peak_rss_mib"],
                     "load": s["load"]},
                    {"score": rc, "cold": r["cold"], "decode": rd["decode"], "ppl": r["ppl"], "rss_score": rc["peak_rss_mib"],
                     "rss_cold": r["peak_rss_mib"], "rss_decode": rd["peak_rss_mib"], "build": rd["build"]})
            results[thr].append(pair)
            print(f"  pair {rep + 1} {thr} thr: score {T} seqprob {H.fmt_timing(s['score'])} llama.cpp "
                  f"{H.fmt_timing(rc)} ({rc['median'] / s['score']['median']:.2f}x); cold "
                  f"{s['cold']:.2f} s vs {r['cold']['median']:.2f} s; decode {n_new} seqprob "
                  f"{H.fmt_timing(sd['decode'])} llama.cpp {H.fmt_timing(rd['decode'])} "
                  f"({rd['decode']['median'] / sd['decode']['median']:.2f}x); PPL {s['ppl']:.4f} vs {r['ppl']:.4f}; "
                  f"RSS MiB score {s['peak_rss_mib']:.0f}/{rc['peak_rss_mib']:.0f} decode "
                  f"{sd['peak_rss_mib']:.0f}/{rd['peak_rss_mib']:.0f}", flush=True)
    return {"check": check, "results": results, "model": m}


def _rows(opts, name: str, out: dict) -> list:
    T, n_new = shapes(opts.quick)
    label = LABELS[name] + (" tiny (--quick)" if opts.quick else "")
    check, results = out["check"], out["results"]
    rows = []
    for key, work, ref, rss, target in (
            ("score", f"{label} score 1x{T} all positions (call alone)", "llama_decode F32, all logits (no log-softmax)",
             "rss_score", 1.2),
            ("cold", f"{label} score 1x{T}, load + first call (process)", "llama-perplexity F32, process wall",
             "rss_cold", None),
            ("decode", f"{label} greedy decode {n_new} tokens", f"llama-bench tg{n_new} F32", "rss_decode", 1.2)):
        for thr, pairs in results.items():
            ratios = [r[key]["median"] / s[key]["median"] for s, r in pairs]
            peak = f"{max(s[rss] for s, _ in pairs):,.0f} / {max(r[rss] for _, r in pairs):,.0f}"
            ratio = statistics.median(ratios)
            rows.append(H.make_row(opts, work, ref, thr, statistics.median(s[key]["median"] for s, _ in pairs),
                                   statistics.median(r[key]["median"] for _, r in pairs), ratios, peak_rss=peak,
                                   target=f">= {target}x" if target else "-",
                                   met=None if target is None else ratio >= target))
    ppl_s, ppl_r = (statistics.median(p[i]["ppl"] for pairs in results.values() for p in pairs) for i in (0, 1))
    rows.append(H.make_row(opts, f"{label} per-token log-probs, {check['n']} random ids: mean abs diff "
                           f"{check['mean']:.1e}, max {check['max']:.1e}; mean vs transformers float64: seqprob "
                           f"{check['seqprob_f64']:.1e}, llama.cpp {check['llamacpp_f64']:.1e}; chunk PPL seqprob "
                           f"{ppl_s:.4f} vs llama.cpp {ppl_r:.4f}", "llamacpp-logprobs (F32 GGUF)", max(opts.threads),
                           target="mean <= 1e-4", met=check["mean"] <= 1e-4))
    return rows


def suite_rows(opts: H.SuiteOptions, models=None, bin_dir=None) -> list:
    """The rows of each model: scoring (call alone; cold), decode, agreement. Without the
    llama.cpp binaries or the reference packages, every row says "not run (...)"."""
    models = models or list(MODELS)
    found, why = find_bin(bin_dir)
    missing = why and "llama.cpp binaries (LLAMACPP_BIN)"
    missing = missing or opts.missing("torch", "transformers", "tokenizers", "gguf")
    src = found and llama_source(found)
    if not missing and not (src and (src / "convert_hf_to_gguf.py").is_file()):
        why, missing = "llama.cpp source tree not found (LLAMACPP_SRC)", "llama.cpp source (LLAMACPP_SRC)"
    if missing:
        print(f"bench_llamacpp: skipped: {why or 'the reference Python lacks ' + missing}", flush=True)
        return [H.make_row(opts, f"{LABELS[n]} {w}", "llama.cpp", " ".join(map(str, opts.threads)), missing=missing)
                for n in models for w in ("score 1x1024", "greedy decode 128", "log-prob agreement")]
    dumper = build_dumper(found, src)
    rows = []
    for name in models:
        rows += _rows(opts, name, run_model(name, opts, found, src, dumper))
    for row in rows:
        row["command"] = f"LLAMACPP_BIN={found} {row['command']}"
    return rows


# ----------------------------------------------------------------------------- main
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="+", default=None, help="thread counts (default 1 2; --quick 1)")
    ap.add_argument("--runs", type=int, default=None, help="timed runs per side (default 7; --quick 3)")
    ap.add_argument("--warmups", type=int, default=None, help="seqprob's untimed calls first (default 2; --quick 1)")
    ap.add_argument("--pairs", "--repeats", dest="repeats", type=int, default=None,
                    help="repeats of each pair (default 3; --quick 1)")
    ap.add_argument("--quick", action="store_true", help="tiny shapes, fewer runs: a smoke run")
    ap.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    ap.add_argument("--bin", default=None, help="folder of llama-perplexity, llama-bench, llama-tokenize "
                    "(default $LLAMACPP_BIN, then /tmp/llamacpp/bin)")
    ap.add_argument("--reference-python", default=sys.executable,
                    help="the Python with torch, transformers, tokenizers, gguf (writes and converts)")
    ap.add_argument("--cpus", default=None, help="pin every child with taskset -c CPUS")
    ap.add_argument("--keep-openblas-env", action="store_true")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--side", choices=["seqprob", "write", "f64"], help=argparse.SUPPRESS)
    ap.add_argument("--task", choices=["check", "score", "decode"], help=argparse.SUPPRESS)
    for hidden in ("--model", "--folder", "--ids", "--out"):
        ap.add_argument(hidden, help=argparse.SUPPRESS)
    ap.add_argument("--new-tokens", type=int, default=128, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child = {"seqprob": seqprob_child, "write": write_checkpoint, "f64": float64_logprobs}[args.side]
        H.emit(child(args))
        return 0
    import importlib.util

    spec = importlib.util.spec_from_file_location("_benchmarks_main", HERE / "__main__.py")
    suite = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(suite)
    ns = argparse.Namespace(quick=args.quick, threads=args.threads, runs=args.runs, warmups=args.warmups,
                            repeats=args.repeats, reference_python=args.reference_python,
                            keep_openblas_env=args.keep_openblas_env, cpus=args.cpus)
    opts = suite.options(ns, SUITE["group"], H.workdir())
    H.warn_if_short(opts)
    load_before, machine = os.getloadavg(), H.machine_header()
    rows = suite_rows(opts, args.models, args.bin)
    found, _ = find_bin(args.bin)
    lines = suite.header(machine, load_before, os.getloadavg(), ns, opts)
    if found:
        lines.append(f"- **llama.cpp**: {found} ({llama_cpp_version(found)})")
    print("\n".join(lines + [""] + suite.table(rows)))
    return 0


def llama_cpp_version(bin_dir: Path) -> str:
    proc = subprocess.run([bin_dir / "llama-bench", "--version"], capture_output=True, text=True)
    return " ".join((proc.stdout + proc.stderr).split()) or "version unknown"


if __name__ == "__main__":
    sys.exit(main())
