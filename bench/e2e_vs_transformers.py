#!/usr/bin/env python3
"""e2e_vs_transformers.py — Hugging Face transformers (PyTorch SDPA attention, bf16, batch 1)
end to end on the GPU: the peer that `longctx bench --compare-transformers` measures in the
same run on the same GPU (issue 3, "CUDA backend", speed).

The model is built from a configuration with the exact hyper-parameters of the
src/model/gen_model.c table (llama-3.1-8b, llama-3.2-1b, qwen2.5-7b, smollm2-135m), with random
weights made directly on the GPU in bf16: no download, and the speed of a dense forward does
not depend on the weights' values. For each context length L:

  prefill  one forward over an L-token random prompt (ids >= 256: no special tokens) into a
           fresh DynamicCache, logits of the last position only (logits_to_keep=1, as our
           engine computes only the rows it samples); torch.cuda.synchronize + perf_counter;
           the best of --reps repetitions (default: 3 up to 8K tokens, 2 above; the first
           also warms the allocator at that size). A prompt that runs out of memory in one
           forward is retried in chunks (--chunk-on-oom tokens; reported).
  decode   --gen tokens greedily after it, one model() call per token with the KV cache
           (argmax on the GPU, fed back without a host round trip), timed as a whole:
           decode tokens/s at a context of L .. L+gen.
  memory   torch.cuda.max_memory_allocated over prefill + decode (weights, KV cache,
           activations; the CUDA context and allocator slack not included) and
           max_memory_reserved.

SDPA backend (--sdpa-backend): by default flash / memory-efficient / math, cuDNN attention
off. Measured on an H100 (torch 2.11, transformers 5.17): with torch's default choice decode
runs through cuDNN attention, which spends ~2.2 ms of CPU per call (a new plan for every new
key length), 62% of a decode step's CPU time: 10 tok/s for a 135M model. `--sdpa-backend
default` keeps torch's choice.

An OOM is reported as such (status=oom), not a crash. stdout: one line per context, exactly
    transformers ctx=1024 prompt_tps=1234.5 decode_tps=67.8 peak_gib=16.1 reserved_gib=17.0 status=ok chunk=0 sdpa=flash
(prompt_tps/decode_tps 0 when not measured); everything else goes to stderr.
--quick: contexts 512,1024, 8 generated tokens, one repetition (to check the set-up).
--diagnose: also print where one decode step's time goes (torch.profiler, on stderr).
"""
import argparse
import contextlib
import inspect
import os
import sys
import time

# name: (arch, layers, embd, ff, heads, kv_heads, head_dim, vocab, trained ctx, rope base,
#        rms eps, llama3 rope factor (0: none), tied embeddings) -- src/model/gen_model.c
CONFIGS = {
    "llama-3.1-8b": ("llama", 32, 4096, 14336, 32, 8, 128, 128256, 131072, 500000.0, 1e-5, 8.0, False),
    "llama-3.2-1b": ("llama", 16, 2048, 8192, 32, 8, 64, 128256, 131072, 500000.0, 1e-5, 32.0, True),
    "qwen2.5-7b": ("qwen2", 28, 3584, 18944, 28, 4, 128, 152064, 32768, 1000000.0, 1e-6, 0.0, False),
    "smollm2-135m": ("llama", 30, 576, 1536, 9, 3, 64, 49152, 8192, 100000.0, 1e-5, 0.0, True),
}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def config_from_shape(shape):
    """--shape arch,layers,embd,ff,heads,kv_heads,head_dim,vocab: a named config with those
    dimensions (for its RoPE and tying details), else a plain one built from them."""
    f = shape.split(",")
    if len(f) != 8:
        raise SystemExit("e2e_vs_transformers: --shape wants arch,layers,embd,ff,heads,kv_heads,"
                         "head_dim,vocab")
    arch, dims = f[0], tuple(int(x) for x in f[1:])
    for name, c in CONFIGS.items():
        if c[0] == arch and c[1:8] == dims:
            return name, c
    return "custom", (arch,) + dims + (8192, 10000.0, 1e-5, 0.0, False)


def build_model(torch, c, max_pos):
    import transformers
    arch, n_layer, embd, ff, heads, kv, hd, vocab, n_ctx, base, eps, l3, tied = c
    cls_cfg = transformers.Qwen2Config if arch == "qwen2" else transformers.LlamaConfig
    cls_model = transformers.Qwen2ForCausalLM if arch == "qwen2" else transformers.LlamaForCausalLM
    params = inspect.signature(cls_cfg.__init__).parameters
    kw = dict(vocab_size=vocab, hidden_size=embd, intermediate_size=ff, num_hidden_layers=n_layer,
              num_attention_heads=heads, num_key_value_heads=kv, rms_norm_eps=eps,
              max_position_embeddings=max(n_ctx, max_pos), tie_word_embeddings=tied,
              attn_implementation="sdpa", use_cache=True)
    if "head_dim" in params:
        kw["head_dim"] = hd
    elif embd // heads != hd:
        raise SystemExit("e2e_vs_transformers: this transformers' %s has no head_dim" % cls_cfg.__name__)
    rope = {"rope_type": "default"}
    if l3 > 0:
        rope = {"rope_type": "llama3", "factor": l3, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
    if "rope_parameters" in params:  # transformers 5
        kw["rope_parameters"] = dict(rope, rope_theta=base)
    else:
        kw["rope_theta"] = base
        if l3 > 0:
            kw["rope_scaling"] = rope
    cfg = cls_cfg(**kw)
    torch.manual_seed(0)
    prev = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("cuda"):
            model = cls_model(cfg)
    finally:
        torch.set_default_dtype(prev)
    model = model.to(torch.bfloat16).eval()
    impl = getattr(model.config, "_attn_implementation", "?")
    if impl != "sdpa":
        raise SystemExit("e2e_vs_transformers: attention implementation is %r, not sdpa" % impl)
    return model


def prefill(torch, model, ids, chunk):
    """Forward the prompt into a fresh cache (in chunks of `chunk` tokens when chunk > 0);
    returns (cache, last logits)."""
    cache = None  # the first forward makes a DynamicCache
    n = ids.shape[1]
    step = chunk if chunk > 0 else n
    out = None
    for s in range(0, n, step):
        e = min(n, s + step)
        out = model(input_ids=ids[:, s:e], past_key_values=cache, use_cache=True,
                    cache_position=torch.arange(s, e, device=ids.device), logits_to_keep=1)
        cache = out.past_key_values
    return cache, out.logits[:, -1, :]


def decode(torch, model, cache, logits, start, n):
    nxt = logits.argmax(dim=-1, keepdim=True)
    for i in range(n):
        pos = torch.tensor([start + i], device=nxt.device)
        out = model(input_ids=nxt, past_key_values=cache, use_cache=True, cache_position=pos)
        cache = out.past_key_values
        nxt = out.logits[:, -1, :].argmax(dim=-1, keepdim=True)
    return nxt


def measure(torch, model, vocab, L, n_gen, reps, chunk, seed):
    g = torch.Generator(device="cpu").manual_seed(seed + L)
    ids = torch.randint(256, vocab, (1, L), generator=g).to("cuda")
    torch.cuda.reset_peak_memory_stats()
    times = []
    cache = logits = None
    for _ in range(reps):
        cache = logits = None
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        cache, logits = prefill(torch, model, ids, chunk)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    t_pre = min(times)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    decode(torch, model, cache, logits, L, n_gen)
    torch.cuda.synchronize()
    t_dec = time.perf_counter() - t0
    peak = torch.cuda.max_memory_allocated() / 2**30
    res = torch.cuda.max_memory_reserved() / 2**30
    del cache, logits
    return L / t_pre, n_gen / t_dec, peak, res


def diagnose(torch, model, vocab, L):
    """Where a decode step's time goes: torch.profiler over 4 steps, and the cost of one tiny
    GPU op issued from Python."""
    from torch.profiler import ProfilerActivity, profile
    ids = torch.randint(256, vocab, (1, L), device="cuda")
    cache, logits = prefill(torch, model, ids, 0)
    decode(torch, model, cache, logits, L, 2)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        decode(torch, model, cache, logits, L + 2, 4)
        torch.cuda.synchronize()
    log(prof.key_averages().table(sort_by="cpu_time_total", row_limit=25))
    x = torch.zeros(16, device="cuda")
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(1000):
        x.add_(1)
    torch.cuda.synchronize()
    log("e2e_vs_transformers: one tiny op from Python: %.1f us" % ((time.perf_counter() - t0) * 1e3))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="llama-3.1-8b", help="one of " + ", ".join(CONFIGS))
    ap.add_argument("--shape", help="arch,layers,embd,ff,heads,kv_heads,head_dim,vocab (instead "
                    "of --config; a named config with those dimensions is used when there is one)")
    ap.add_argument("--contexts", default="1024,32768,131072")
    ap.add_argument("--gen", type=int, default=32, help="tokens decoded after each prompt")
    ap.add_argument("--reps", type=int, default=0,
                    help="prefill repetitions, median kept (0: 3 up to 8K tokens, else 1)")
    ap.add_argument("--chunk", type=int, default=0,
                    help="prefill chunk in tokens (0: the whole prompt in one forward)")
    ap.add_argument("--chunk-on-oom", type=int, default=8192,
                    help="chunk size for the retry when the whole prompt runs out of memory")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="contexts 512,1024, gen 8, reps 1")
    ap.add_argument("--sdpa-backend", choices=["flash", "default"], default="flash",
                    help="flash: flash / memory-efficient / math, cuDNN off (default); "
                    "default: torch's own choice")
    ap.add_argument("--diagnose", action="store_true",
                    help="print where a decode step's time goes (torch.profiler)")
    a = ap.parse_args()
    if a.quick:
        a.contexts, a.gen, a.reps = "512,1024", 8, 1
    try:
        import torch
        import transformers
    except ImportError as e:
        log("e2e_vs_transformers: %s (pip install torch transformers)" % e)
        return 2
    if not torch.cuda.is_available():
        log("e2e_vs_transformers: no CUDA device visible to PyTorch")
        return 2
    if a.shape:
        name, c = config_from_shape(a.shape)
    elif a.config in CONFIGS:
        name, c = a.config, CONFIGS[a.config]
    else:
        log("e2e_vs_transformers: unknown config %r (known: %s)" % (a.config, ", ".join(CONFIGS)))
        return 2
    contexts = [int(x) for x in a.contexts.split(",") if x.strip()]
    env = " ".join("%s=%s" % (k, os.environ[k]) for k in sorted(os.environ)
                   if k.startswith(("PYTORCH_", "CUDA_LAUNCH", "TORCH_")))
    if env:
        log("e2e_vs_transformers: environment: " + env)
    OOM = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)

    log("e2e_vs_transformers: %s (%s), torch %s, transformers %s, %s, attention sdpa, bf16, "
        "batch 1; random weights (a dense forward's speed does not depend on the values)"
        % (name, c[0], torch.__version__, transformers.__version__, torch.cuda.get_device_name(0)))
    t0 = time.perf_counter()
    model = build_model(torch, c, max(contexts) + a.gen + 16)
    torch.cuda.synchronize()
    log("e2e_vs_transformers: model built on the GPU in %.1f s, %.2f GiB of weights"
        % (time.perf_counter() - t0, torch.cuda.memory_allocated() / 2**30))
    vocab = c[7]
    backend_ctx = contextlib.nullcontext()
    sdpa = a.sdpa_backend
    if sdpa == "flash":
        try:
            from torch.nn.attention import SDPBackend, sdpa_kernel
            backend_ctx = sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
                                       SDPBackend.MATH])
        except ImportError:
            log("e2e_vs_transformers: this torch has no torch.nn.attention.sdpa_kernel; "
                "using its default SDPA backend")
            sdpa = "default"
    log("e2e_vs_transformers: SDPA backends: %s" % (
        "flash, memory-efficient, math (cuDNN off)" if sdpa == "flash" else "torch's default"))
    with torch.inference_mode(), backend_ctx:
        measure(torch, model, vocab, 128, 4, 1, 0, a.seed + 1)  # warm-up: kernels, cuBLAS
        if a.diagnose:
            diagnose(torch, model, vocab, contexts[0])
        for L in contexts:
            reps = a.reps if a.reps > 0 else (3 if L <= 8192 else 2)
            chunk, status = a.chunk, "ok"
            try:
                p, d, pk, rs = measure(torch, model, vocab, L, a.gen, reps, chunk, a.seed)
            except OOM:
                p = d = pk = rs = 0.0
                status = "oom"
            if status == "oom" and chunk == 0 and a.chunk_on_oom > 0:
                torch.cuda.empty_cache()
                log("e2e_vs_transformers: ctx %d: out of memory in one forward; retrying the "
                    "prefill in chunks of %d tokens" % (L, a.chunk_on_oom))
                chunk = a.chunk_on_oom
                try:
                    p, d, pk, rs = measure(torch, model, vocab, L, a.gen, reps, chunk, a.seed)
                    status = "ok"
                except OOM:
                    p = d = pk = rs = 0.0
                    status = "oom"
            torch.cuda.empty_cache()
            if status == "oom":
                pk = torch.cuda.max_memory_allocated() / 2**30
                rs = torch.cuda.max_memory_reserved() / 2**30
                log("e2e_vs_transformers: ctx %d: out of memory (peak %.2f GiB allocated)" % (L, pk))
            else:
                log("e2e_vs_transformers: ctx %d: prefill %.1f tok/s%s, decode %.2f tok/s, peak "
                    "%.2f GiB" % (L, p, " (chunks of %d)" % chunk if chunk else "", d, pk))
            print("transformers ctx=%d prompt_tps=%.1f decode_tps=%.2f peak_gib=%.2f "
                  "reserved_gib=%.2f status=%s chunk=%d sdpa=%s" % (L, p, d, pk, rs, status, chunk,
                                                                     sdpa),
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
