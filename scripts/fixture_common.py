"""fixture_common.py — helpers shared by the fixture generators and the llama.cpp benchmark:
log-softmax / top-k of a logit vector, greedy decoding with margins, and the llama-cpp-python workaround for VMs that
advertise AMX without granting it."""
import numpy as np


def log_softmax(x):
    x = np.asarray(x, dtype=np.float64)
    m = x.max()
    return x - (m + np.log(np.exp(x - m).sum()))


def top_pairs(lp, k):
    """The k best (token id, log-prob) pairs, best first (stable for ties)."""
    idx = np.argsort(-lp, kind="stable")[:k]
    return [(int(i), float(lp[i])) for i in idx]


def greedy_with_margins(first_logits, step, n):
    """n greedy tokens starting from first_logits; step(token) evaluates the token and returns
    the next logits. Returns (ids, margins): margin = best minus second-best log-prob at each
    step, so fixtures can tell near ties apart."""
    greedy, margins = [], []
    last = first_logits
    for _ in range(n):
        lp = log_softmax(last)
        order = np.argsort(-lp, kind="stable")[:2]
        nxt = int(order[0])
        greedy.append(nxt)
        margins.append(float(lp[order[0]] - lp[order[1]]))
        last = step(nxt)
    return greedy, margins


def llamacpp_no_extra_bufts():
    """Make llama-cpp-python load models with use_extra_bufts = false. The extra buffer types
    (AMX repacking on CPUs that advertise AMX) die with SIGILL on machines whose kernel or
    hypervisor does not grant the AMX tile state (seen on the dev VM: `tilezero` in
    ggml_backend_amx_mul_mat). Without them llama.cpp uses its ordinary AVX2/AVX-512 kernels.
    Returns False when this llama-cpp-python has no such parameter."""
    import llama_cpp.llama_cpp as lcc

    if "use_extra_bufts" not in [f[0] for f in lcc.llama_model_params._fields_]:
        return False
    orig = lcc.llama_model_default_params
    if getattr(orig, "_longctx_patched", False):
        return True

    def params():
        p = orig()
        p.use_extra_bufts = False
        return p

    params._longctx_patched = True
    lcc.llama_model_default_params = params
    return True
