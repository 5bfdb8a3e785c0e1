"""fixture_common.py — helpers shared by the fixture generators and the llama.cpp benchmark:
log-softmax / top-k of a logit vector, and the llama-cpp-python workaround for VMs that
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
