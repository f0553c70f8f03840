#!/usr/bin/env python3
"""Writes the golden cases of tests/golden/ (docs/golden.md) from third-party model code.

Run through scripts/golden/make_golden.sh, which creates the virtual environment with the pinned
torch, transformers and flash-linear-attention. Every case draws small seeded inputs that are
exactly representable in the format our backends read (FP32, or BF16 widened to FP32), stores
them, runs the third-party functions on them IN FLOAT64 and stores their outputs as float64, with
a manifest naming the versions, the functions, the shapes and the seeds.

Float64 evaluation: the reference functions cast to torch.float32 themselves (`x.float()`,
`.to(torch.float32)`, `dtype=torch.float`). For the duration of each call, `fp64()` maps
torch.float32 / torch.float to torch.float64 inside the modules named, and Tensor.float() to
Tensor.double(), so their own FP32 roundings drop out; every output is checked to be float64.
Hub-kernel decorators are bypassed through `__wrapped__` (the pure-PyTorch function runs, never a
Triton kernel). Nothing of the third-party code is copied: it is imported and called.
"""
import argparse
import contextlib
import json
import math
import os
import shutil

import numpy as np
import torch
import transformers
import fla
import fla.ops.gated_delta_rule.naive as fla_naive
import transformers.models.qwen3_next.modeling_qwen3_next as qwen3_next
import transformers.models.deepseek_v3.modeling_deepseek_v3 as deepseek_v3
import transformers.models.deepseek_v4.modeling_deepseek_v4 as deepseek_v4
import transformers.models.longcat_flash.modeling_longcat_flash as longcat_flash
import transformers.activations as activations
import transformers.models.nemotron_h.modeling_nemotron_h as nemotron_h
import transformers.models.gpt_oss.modeling_gpt_oss as gpt_oss
import transformers.models.qwen2_5_vl.modeling_qwen2_5_vl as qwen2_5_vl
import transformers.masking_utils as masking_utils
import transformers.modeling_rope_utils as rope_utils_module


class _TorchFp64:
    """The torch module, with its float32 names pointing at float64."""

    def __getattr__(self, name):
        if name in ("float32", "float"):
            return torch.float64
        return getattr(torch, name)


@contextlib.contextmanager
def fp64(*modules):
    saved_float = torch.Tensor.float
    saved = [(m, m.torch) for m in modules]
    torch.Tensor.float = lambda self, *a, **k: self.to(torch.float64)
    for m in modules:
        m.torch = _TorchFp64()
    try:
        yield
    finally:
        torch.Tensor.float = saved_float
        for m, t in saved:
            m.torch = t


def require_f64(*tensors):
    for t in tensors:
        assert t.dtype == torch.float64, f"reference output is {t.dtype}, not float64"


def bf16_round(x):
    """Round float32 values to the nearest-even BF16, returned as float32 (exact widening)."""
    b = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16 << 16
    return b.astype(np.uint32).view(np.float32)


def t64(a):
    return torch.from_numpy(np.asarray(a, dtype=np.float64).copy())


class Writer:
    def __init__(self, out):
        self.out = out
        self.cases = []

    def case(self, name, family, seed, functions, params, arrays):
        d = os.path.join(self.out, name)
        os.makedirs(d, exist_ok=True)
        files = {}
        for key, a in arrays.items():
            a = np.ascontiguousarray(a)
            assert a.dtype in (np.float32, np.float64, np.int64), (key, a.dtype)
            np.save(os.path.join(d, key + ".npy"), a)
            files[key] = {"file": f"{name}/{key}.npy", "dtype": str(a.dtype), "shape": list(a.shape)}
        self.cases.append({"name": name, "family": family, "seed": seed, "functions": functions,
                           "params": params, "arrays": files})


# ---------------------------------------------------------------------------- RMSNorm

def rmsnorm_case(w, seed):
    rows, width, eps = 12, 96, 1e-6
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, width)).astype(np.float32)
    x[3] *= np.exp2(rng.integers(-10, 11, width)).astype(np.float32)  # a wide dynamic range row
    x[7] *= 1e-3
    x = bf16_round(x)
    weight = bf16_round(rng.standard_normal(width).astype(np.float32) * 0.25)
    norm = qwen3_next.Qwen3NextRMSNorm(width, eps=eps).double()
    with torch.no_grad():
        norm.weight.copy_(t64(weight))
        with fp64(qwen3_next):
            y = norm(t64(x))
    require_f64(y)
    w.case("rmsnorm_qwen3_next", "rmsnorm", seed, ["transformers Qwen3NextRMSNorm.forward"],
           {"rows": rows, "width": width, "eps": eps},
           {"x": x, "weight": weight, "y": y.numpy()})


# ---------------------------------------------------------------------------- routing

def qwen3_next_routing_case(w, seed, norm_topk_prob, name, bf16_logits=False):
    rows, experts, top_k = 48, 64, 8
    rng = np.random.default_rng(seed)
    logits = (rng.standard_normal((rows, experts)) * 2.0).astype(np.float32)
    if bf16_logits:  # what the top-k reads on the BF16 router path
        logits = bf16_round(logits)
    # Exact ties the total order has to break: duplicated values at and around the cut.
    for r in range(0, rows, 6):
        order = np.argsort(-logits[r], kind="stable")
        logits[r, order[top_k]] = logits[r, order[top_k - 1]]  # a tie across the cut
        logits[r, order[1]] = logits[r, order[0]]  # a tie inside the selection
    cfg = qwen3_next.Qwen3NextConfig(hidden_size=experts, num_experts=experts,
                                     num_experts_per_tok=top_k, norm_topk_prob=norm_topk_prob)
    router = qwen3_next.Qwen3NextTopKRouter(cfg).double()
    with torch.no_grad():
        router.weight.copy_(torch.eye(experts, dtype=torch.float64))  # logits = the stored ones
        with fp64(qwen3_next):
            out_logits, weights, ids = router(t64(logits))
    require_f64(out_logits, weights)
    assert np.array_equal(out_logits.numpy(), logits.astype(np.float64))
    w.case(name, "routing_softmax", seed,
           ["transformers Qwen3NextTopKRouter.forward (weight = identity: logits = the stored ones)"],
           {"rows": rows, "experts": experts, "top_k": top_k, "norm_topk_prob": norm_topk_prob,
            "routed_scaling_factor": 1.0, "bf16_logits": bf16_logits},
           {"logits": logits, "ids": ids.numpy().astype(np.int64), "weights": weights.numpy()})


def deepseek_v3_route(logits, bias, top_k=8, n_group=8, topk_group=4, scale=2.5):
    """transformers' DeepseekV3TopkRouter with weight = identity on float64 `logits` [rows, E]
    and `bias`: its ids and weights, and its group scores (a local of its forward, by the same
    expression: the sum of each group's two largest sigmoid(l) + bias), all float64."""
    rows, experts = logits.shape
    cfg = deepseek_v3.DeepseekV3Config(hidden_size=experts, n_routed_experts=experts,
                                       num_experts_per_tok=top_k, n_group=n_group,
                                       topk_group=topk_group, routed_scaling_factor=scale,
                                       norm_topk_prob=True)
    router = deepseek_v3.DeepseekV3TopkRouter(cfg).double()
    assert router.num_experts == experts and router.num_group == n_group
    with torch.no_grad():
        router.weight.copy_(torch.eye(experts, dtype=torch.float64))
        router.e_score_correction_bias.copy_(t64(bias))
        with fp64(deepseek_v3):
            out_logits, weights, ids = router(t64(logits))
            choice = torch.sigmoid(t64(logits)) + t64(bias)
            group_scores = choice.view(rows, n_group, -1).topk(2, dim=-1)[0].sum(dim=-1)
    require_f64(out_logits, weights, group_scores)
    assert np.array_equal(out_logits.numpy(), np.asarray(logits, dtype=np.float64))
    return ids.numpy().astype(np.int64), weights.numpy(), group_scores.numpy()


def deepseek_v3_routing_case(w, seed, name="routing_deepseek_v3", bf16_logits=False):
    # DeepSeek-V3's own routing shape: 256 experts in 8 groups, 4 groups kept, top-8, scale 2.5.
    rows, experts, top_k, n_group, topk_group, scale = 64, 256, 8, 8, 4, 2.5
    rng = np.random.default_rng(seed)
    logits = (rng.standard_normal((rows, experts)) * 1.5).astype(np.float32)
    if bf16_logits:  # what the top-k reads on the BF16 router path
        logits = bf16_round(logits)
    bias = (rng.standard_normal(experts) * 0.05).astype(np.float32)
    ids, weights, group_scores = deepseek_v3_route(logits, bias, top_k, n_group, topk_group, scale)
    w.case(name, "routing_grouped", seed,
           ["transformers DeepseekV3TopkRouter.forward (weight = identity: logits = the stored "
            "ones; e_score_correction_bias = bias; topk sorted=False: ids are a set)"],
           {"rows": rows, "experts": experts, "top_k": top_k, "n_group": n_group,
            "topk_group": topk_group, "routed_scaling_factor": scale, "norm_topk_prob": True,
            "scoring": "sigmoid", "bf16_logits": bf16_logits},
           {"logits": logits, "bias": bias, "ids": ids, "weights": weights,
            "group_scores": group_scores})


def deepseek_v3_compare_case(w, bufferlab, path, name):
    # The inputs `bufferlab compare --op topk --preset deepseek-v3.2 --tokens 64 --path PATH`
    # generates (seed 1): its dump's FP64 logits of the router inputs (identical for the bf16
    # and fp32-gate paths, which read the BF16 x; fp32-routing reads the FP32 x) and bias. The
    # router runs with weight = identity on those float64 logits, so its selection is the
    # model's on the exact logits; the C++ test re-runs compare's chain on every backend.
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as dump:
        subprocess.run([bufferlab, "compare", "--op", "topk", "--preset", "deepseek-v3.2",
                        "--tokens", "64", "--path", path, "--seed", "1", "--dump", dump],
                       check=True, capture_output=True)
        logits = np.load(os.path.join(dump, "oracle_exact_logits.npy")).astype(np.float64)
        bias = np.load(os.path.join(dump, "input_bias.npy")).astype(np.float32)
    rows, experts = logits.shape
    top_k, n_group, topk_group, scale = 8, 8, 4, 2.5
    ids, weights, group_scores = deepseek_v3_route(logits, bias, top_k, n_group, topk_group, scale)
    w.case(name, "routing_grouped_compare", 1,
           ["bufferlab compare --op topk --preset deepseek-v3.2 --tokens 64 --path " + path +
            " --seed 1 --dump: oracle_exact_logits, input_bias",
            "transformers DeepseekV3TopkRouter.forward (weight = identity on those logits)"],
           {"rows": rows, "experts": experts, "top_k": top_k, "n_group": n_group,
            "topk_group": topk_group, "routed_scaling_factor": scale, "norm_topk_prob": True,
            "scoring": "sigmoid", "preset": "deepseek-v3.2", "path": path, "compare_seed": 1},
           {"logits": logits, "bias": bias, "ids": ids, "weights": weights,
            "group_scores": group_scores})


def rope_cases(w, configs_dir):
    # transformers' RoPE initialisation (modeling_rope_utils: ROPE_INIT_FUNCTIONS for linear,
    # llama3 and yarn; a model's compute_default_rope_parameters for default) on every shipped
    # config whose attention uses RoPE, with the parameters transformers' own config class
    # standardises (AutoConfig.for_model), in float64; and once more in transformers' native FP32,
    # to record how far that lies from the float64 values (docs/golden.md). A config with
    # several RoPE parameter sets (DeepSeek-V4: main and compress) gives one case per set.
    # Nemotron-H has none (its attention uses no positional embedding). A linear case is added
    # on Qwen3-8B's geometry (factor 4): no shipped config uses that type.
    from transformers import AutoConfig, LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    import transformers.modeling_rope_utils as rope_utils
    sets = []
    for path in sorted(os.listdir(configs_dir)):
        d = json.load(open(os.path.join(configs_dir, path)))
        cfg = AutoConfig.for_model(d["model_type"], **{k: v for k, v in d.items() if k != "model_type"})
        cfg = getattr(cfg, "text_config", None) or cfg
        rp = getattr(cfg, "rope_parameters", None)
        if not rp:
            continue
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        named = rp if all(isinstance(v, dict) for v in rp.values()) else {"": rp}
        for layer, params in named.items():
            stem = os.path.splitext(path)[0].lower().replace(".", "_").replace("-", "_")
            sets.append((stem + ("_" + layer if layer else ""), path, head_dim,
                         cfg.max_position_embeddings, dict(params)))
    sets.append(("qwen3_8b_linear_x4", "Qwen3-8B.json (rope_type linear, factor 4)", 128, 40960,
                 {"rope_type": "linear", "rope_theta": 1000000.0, "factor": 4.0}))
    for name, source, head_dim, max_pos, params in sets:
        params.pop("type", None)
        params.pop("mrope_section", None)
        params.pop("mrope_interleaved", None)
        rope_type = params.get("rope_type", "default")

        def run():
            shim = LlamaConfig(hidden_size=head_dim, num_attention_heads=1, head_dim=head_dim,
                               max_position_embeddings=max_pos, rope_parameters=dict(params))
            if rope_type == "default":
                return qwen3_next.Qwen3NextRotaryEmbedding.compute_default_rope_parameters(shim, "cpu")
            return ROPE_INIT_FUNCTIONS[rope_type](shim, "cpu")

        native, native_af = run()
        with fp64(rope_utils, qwen3_next):
            inv64, af = run()
        require_f64(inv64)
        native = native.numpy().astype(np.float32)
        ulps = np.abs(native.view(np.int32).astype(np.int64) -
                      inv64.numpy().astype(np.float32).view(np.int32).astype(np.int64))
        rotary_dim = int(head_dim * params.get("partial_rotary_factor", 1.0))
        w.case("rope_" + name, "rope", 0,
               [f"transformers {'compute_default_rope_parameters' if rope_type == 'default' else 'ROPE_INIT_FUNCTIONS[' + repr(rope_type) + ']'} on {source}"],
               {"rope_type": rope_type, "rope_theta": float(params["rope_theta"]),
                "rotary_dim": rotary_dim, "factor": float(params.get("factor", 1.0)),
                "low_freq_factor": float(params.get("low_freq_factor", 1.0)),
                "high_freq_factor": float(params.get("high_freq_factor", 4.0)),
                "original_max_position_embeddings": float(params.get("original_max_position_embeddings", 0)),
                "beta_fast": float(params.get("beta_fast") or 32),
                "beta_slow": float(params.get("beta_slow") or 1),
                "mscale": float(params.get("mscale") or 0), "mscale_all_dim": float(params.get("mscale_all_dim") or 0),
                "attention_factor": params.get("attention_factor"),
                "truncate": bool(params.get("truncate", True)),
                "attention_factor_fp64": float(af), "attention_factor_fp32_native": float(native_af),
                "native_fp32_max_ulps": int(ulps.max())},
               {"inv_freq": inv64.numpy()})


def deepseek_v4_hash_case(w, seed):
    # Hash routing: the experts come from tid2eid[token id]; the weights from the scoring
    # (sqrtsoftplus) of the selected logits, normalised, scaled.
    rows, experts, top_k, vocab, scale = 24, 16, 4, 32, 1.5
    rng = np.random.default_rng(seed)
    logits = (rng.standard_normal((rows, experts)) * 3.0).astype(np.float32)
    tid2eid = np.stack([rng.permutation(experts)[:top_k] for _ in range(vocab)]).astype(np.int64)
    token_ids = rng.integers(0, vocab, rows).astype(np.int64)
    cfg = deepseek_v4.DeepseekV4Config(hidden_size=experts, vocab_size=vocab,
                                       num_local_experts=experts, n_routed_experts=experts,
                                       num_experts_per_tok=top_k, scoring_func="sqrtsoftplus",
                                       routed_scaling_factor=scale)
    router = deepseek_v4.DeepseekV4HashRouter(cfg).double()
    assert router.num_experts == experts and router.top_k == top_k
    with torch.no_grad():
        router.weight.copy_(torch.eye(experts, dtype=torch.float64))
        router.tid2eid.copy_(torch.from_numpy(tid2eid))
        with fp64(deepseek_v4, activations):
            out_logits, weights, ids = router(t64(logits), torch.from_numpy(token_ids))
    require_f64(out_logits, weights)
    assert np.array_equal(out_logits.numpy(), logits.astype(np.float64))
    w.case("routing_deepseek_v4_hash", "routing_hash", seed,
           ["transformers DeepseekV4HashRouter.forward (weight = identity: logits = the stored "
            "ones; scoring sqrtsoftplus = softplus(x).sqrt(), softplus linear above 20)"],
           {"rows": rows, "experts": experts, "top_k": top_k, "vocab": vocab,
            "routed_scaling_factor": scale, "norm_topk_prob": True, "scoring": "sqrtsoftplus"},
           {"logits": logits, "tid2eid": tid2eid, "token_ids": token_ids,
            "ids": ids.numpy().astype(np.int64), "weights": weights.numpy()})


def longcat_zero_expert_case(w, seed, name, bias_scale):
    # Zero-computation experts: ids E..E+Z-1 are identities; the router's softmax runs over all
    # E + Z logits, top-k by softmax probability + e_score_correction_bias, weights times 6.
    rows, experts, zero, top_k, scale = 32, 24, 8, 6, 6.0
    rng = np.random.default_rng(seed)
    logits = (rng.standard_normal((rows, experts + zero)) * 1.5).astype(np.float32)
    bias = (rng.standard_normal(experts + zero) * bias_scale).astype(np.float32)
    cfg = longcat_flash.LongcatFlashConfig(hidden_size=experts + zero, n_routed_experts=experts,
                                           zero_expert_num=zero, num_experts_per_tok=top_k,
                                           routed_scaling_factor=scale)
    router = longcat_flash.LongcatFlashTopkRouter(cfg).double()
    assert router.n_routed_experts == experts + zero and router.top_k == top_k
    with torch.no_grad():
        router.classifier.weight.copy_(torch.eye(experts + zero, dtype=torch.float64))
        router.e_score_correction_bias.copy_(t64(bias))
        with fp64(longcat_flash):
            out_logits, weights, ids = router(t64(logits))
    require_f64(out_logits, weights)
    assert np.array_equal(out_logits.numpy(), logits.astype(np.float64))
    w.case(name, "routing_zero_experts", seed,
           ["transformers LongcatFlashTopkRouter.forward (classifier = identity: logits = the "
            "stored ones; topk sorted=False: ids are a set)"],
           {"rows": rows, "experts": experts, "zero_expert_num": zero, "top_k": top_k,
            "routed_scaling_factor": scale, "norm_topk_prob": False, "scoring": "softmax",
            "bias_scale": bias_scale},
           {"logits": logits, "bias": bias, "ids": ids.numpy().astype(np.int64),
            "weights": weights.numpy()})


# ---------------------------------------------------------------------------- GDN

def gdn_case(w, seed, name, nk, nv, kd, vd, L):
    rng = np.random.default_rng(seed)
    conv_dim = 2 * nk * kd + nv * vd
    # conv: the conv1d + SiLU outputs the core reads (Q | K | V, before the L2 norm), FP32.
    conv = rng.uniform(-1.0, 1.0, (L, conv_dim)).astype(np.float32)
    beta = rng.uniform(0.05, 0.95, (L, nv)).astype(np.float32)
    alpha = rng.uniform(0.90, 0.999, (L, nv)).astype(np.float32)
    gates = np.stack([beta, alpha], axis=-1)  # [L, nv, 2] = (β, α): ssm_gates
    state = (rng.uniform(-0.5, 0.5, (nv, kd, vd))).astype(np.float32)
    q = t64(conv[:, :nk * kd]).view(1, L, nk, kd)
    k = t64(conv[:, nk * kd:2 * nk * kd]).view(1, L, nk, kd)
    v = t64(conv[:, 2 * nk * kd:]).view(1, L, nv, vd)
    g = torch.log(t64(alpha)).view(1, L, nv)  # the log-space decay the references take
    b = t64(beta).view(1, L, nv)
    s0 = t64(state).view(1, nv, kd, vd)
    out = {"conv": conv, "gates": gates, "state_in": state}
    with fp64(qwen3_next):
        o, s = qwen3_next.torch_chunk_gated_delta_rule.__wrapped__(
            q, k, v, g, b, chunk_size=64, initial_state=s0.clone(), output_final_state=True,
            use_qk_l2norm_in_kernel=True)
        require_f64(o, s)
        out["hf_chunk_o"], out["hf_chunk_state"] = o.reshape(L, nv * vd).numpy(), s[0].numpy()
        o, s = qwen3_next.torch_recurrent_gated_delta_rule.__wrapped__(
            q, k, v, g, b, initial_state=s0.clone(), output_final_state=True,
            use_qk_l2norm_in_kernel=True)
        require_f64(o, s)
        out["hf_recurrent_o"], out["hf_recurrent_state"] = o.reshape(L, nv * vd).numpy(), s[0].numpy()
        # fla's naive references take normalised q, k and one head count: transformers' l2norm
        # (the same eps, 1e-6) and the GQA repeat (value head v reads key head v / (nv / nk)).
        qn = qwen3_next.l2norm(q, dim=-1, eps=1e-6).repeat_interleave(nv // nk, dim=2)
        kn = qwen3_next.l2norm(k, dim=-1, eps=1e-6).repeat_interleave(nv // nk, dim=2)
    with fp64(fla_naive):
        o, s = fla_naive.naive_recurrent_gated_delta_rule(
            qn, kn, v, b, g, scale=kd ** -0.5, initial_state=s0.clone(), output_final_state=True)
        require_f64(o, s)
        out["fla_recurrent_o"], out["fla_recurrent_state"] = o.reshape(L, nv * vd).numpy(), s[0].numpy()
        o, s = fla_naive.naive_chunk_gated_delta_rule(
            qn, kn, v, g, b, chunk_size=64, scale=kd ** -0.5, initial_state=s0.clone(),
            output_final_state=True)
        require_f64(o, s)
        out["fla_chunk_o"], out["fla_chunk_state"] = o.reshape(L, nv * vd).numpy(), s[0].numpy()
    w.case(name, "gdn", seed,
           ["transformers qwen3_next.torch_chunk_gated_delta_rule (chunk 64, "
            "use_qk_l2norm_in_kernel=True)",
            "transformers qwen3_next.torch_recurrent_gated_delta_rule (use_qk_l2norm_in_kernel=True)",
            "fla naive_recurrent_gated_delta_rule (q, k: transformers l2norm, GQA repeat)",
            "fla naive_chunk_gated_delta_rule (chunk 64; q, k as above)"],
           {"nk": nk, "nv": nv, "kd": kd, "vd": vd, "L": L, "g": "log(alpha) in float64"}, out)


def conv_case(w, seed, name, module, family, channels, with_bias, params):
    # Causal depthwise conv1d + SiLU over L tokens from a carried tail of K - 1 inputs: the
    # model's causal_conv1d_update (its torch path), which also returns the updated tail.
    L, K = 10, 4
    rng = np.random.default_rng(seed)
    x = bf16_round(rng.uniform(-2.0, 2.0, (L, channels)).astype(np.float32))
    weight = bf16_round(rng.uniform(-0.6, 0.6, (channels, K)).astype(np.float32))
    bias = bf16_round(rng.uniform(-0.5, 0.5, channels).astype(np.float32))
    state = bf16_round(rng.uniform(-2.0, 2.0, (channels, K - 1)).astype(np.float32))
    st = t64(state).view(1, channels, K - 1).clone()
    with fp64(module):
        out = module.causal_conv1d_update.__wrapped__(
            t64(x).T.reshape(1, channels, L).contiguous(), st, t64(weight),
            t64(bias) if with_bias else None, activation="silu")
    require_f64(out, st)
    arrays = {"x": x, "weight": weight, "state_in": state, "out": out[0].T.numpy(),
              "state_out": st[0].numpy()}
    if with_bias:
        arrays["bias"] = bias
    w.case(name, family, seed,
           [f"transformers {module.__name__.split('.')[-1]}.causal_conv1d_update (activation silu)"],
           dict(params, L=L, kernel=K, channels=channels), arrays)


def gdn_gated_norm_case(w, seed):
    # The GDN output norm: RMSNorm(o)·w·silu(z) per value head, the plain weight w.
    rows, nv, vd, eps = 6, 2, 32, 1e-6
    rng = np.random.default_rng(seed)
    o = bf16_round((rng.standard_normal((rows, nv * vd)) * 0.5).astype(np.float32))
    z = bf16_round((rng.standard_normal((rows, nv * vd)) * 2.0).astype(np.float32))
    weight = bf16_round((1.0 + 0.5 * rng.standard_normal(vd)).astype(np.float32))
    norm = qwen3_next.Qwen3NextRMSNormGated(vd, eps=eps).double()
    with torch.no_grad():
        norm.weight.copy_(t64(weight))
        with fp64(qwen3_next):
            y = norm(t64(o).view(-1, vd), t64(z).view(-1, vd)).reshape(rows, nv * vd)
    require_f64(y)
    w.case("gdn_gated_norm_qwen3_next", "gdn_gated_norm", seed,
           ["transformers Qwen3NextRMSNormGated.forward (per value head, as the model applies it)"],
           {"rows": rows, "nv": nv, "vd": vd, "eps": eps},
           {"o": o, "z": z, "weight": weight, "y": y.numpy()})


def ssd_gated_norm_case(w, seed):
    # The Mamba-2 output norm, norm_before_gate = False: g = y·silu(z), RMSNorm over groups of
    # d_inner / n_groups columns, times w.
    rows, H, P, ng, eps = 6, 4, 16, 2, 1e-6
    d_inner = H * P
    rng = np.random.default_rng(seed)
    y = bf16_round((rng.standard_normal((rows, d_inner)) * 0.5).astype(np.float32))
    z = bf16_round((rng.standard_normal((rows, d_inner)) * 2.0).astype(np.float32))
    weight = bf16_round((1.0 + 0.5 * rng.standard_normal(d_inner)).astype(np.float32))
    norm = nemotron_h.NemotronHRMSNormGated(d_inner, group_size=d_inner // ng, eps=eps).double()
    with torch.no_grad():
        norm.weight.copy_(t64(weight))
        with fp64(nemotron_h):
            out = norm(t64(y), gate=t64(z))
    require_f64(out)
    w.case("ssd_gated_norm_nemotron_h", "ssd_gated_norm", seed,
           ["transformers NemotronHRMSNormGated.forward (group_size = d_inner / n_groups)"],
           {"rows": rows, "H": H, "P": P, "n_groups": ng, "eps": eps},
           {"y": y, "z": z, "weight": weight, "out": out.numpy()})


# ---------------------------------------------------------------------------- Mamba-2 SSD

def ssd_case(w, seed):
    H, P, N, ng, L = 4, 16, 16, 2, 80
    d_inner = H * P
    rng = np.random.default_rng(seed)
    xbc = bf16_round(rng.uniform(-1.0, 1.0, (L, d_inner + 2 * ng * N)).astype(np.float32))
    dt_raw = bf16_round(rng.uniform(-3.0, 0.5, (L, H)).astype(np.float32))
    dt_bias = rng.uniform(-1.0, 0.5, H).astype(np.float32)
    a_log = np.log(np.arange(1, H + 1, dtype=np.float64)).astype(np.float32)
    D = rng.uniform(0.5, 1.5, H).astype(np.float32)
    state = rng.uniform(-0.5, 0.5, (H, P, N)).astype(np.float32)
    cfg = nemotron_h.NemotronHConfig()
    dt_min = float(cfg.time_step_min)
    x = t64(xbc[:, :d_inner]).view(1, L, H, P)
    B = t64(xbc[:, d_inner:d_inner + ng * N]).view(1, L, ng, N)
    C = t64(xbc[:, d_inner + ng * N:]).view(1, L, ng, N)
    A = -torch.exp(t64(a_log))
    out = {"xbc": xbc, "dt_raw": dt_raw, "dt_bias": dt_bias, "a_log": a_log, "D": D,
           "state_in": state}
    with fp64(nemotron_h):
        y, s = nemotron_h.mamba2_chunk_scan.__wrapped__(
            x, t64(dt_raw).view(1, L, H), A, B, C, chunk_size=64, D=t64(D), dt_bias=t64(dt_bias),
            initial_states=t64(state).view(1, H, P, N), dt_softplus=True,
            dt_limit=(dt_min, float("inf")), return_final_states=True)
        require_f64(y, s)
        out["hf_chunk_y"], out["hf_chunk_state"] = y.reshape(L, d_inner).numpy(), s[0].numpy()
        # The per-token form (the model's decode path), token by token from the same state.
        st = t64(state).view(1, H, P, N).clone()
        ys = []
        for t in range(L):
            yt = nemotron_h.mamba2_selective_state_update.__wrapped__(
                st, x[:, t], t64(dt_raw[t]).view(1, H, 1).expand(1, H, P),
                A[:, None, None].expand(H, P, N), B[:, t], C[:, t],
                D=t64(D)[:, None].expand(H, P), dt_bias=t64(dt_bias)[:, None].expand(H, P),
                dt_softplus=True)
            require_f64(yt)
            ys.append(yt.reshape(d_inner))
        out["hf_recurrent_y"], out["hf_recurrent_state"] = torch.stack(ys).numpy(), st[0].numpy()
    w.case("ssd_nemotron_h", "ssd", seed,
           ["transformers nemotron_h.mamba2_chunk_scan (chunk 64, dt_softplus=True, "
            "dt_limit=(time_step_min, inf) as NemotronHMamba2Mixer passes it)",
            "transformers nemotron_h.mamba2_selective_state_update, token by token "
            "(dt_softplus=True, no dt clamp)"],
           {"H": H, "P": P, "N": N, "n_groups": ng, "L": L, "time_step_min": dt_min,
            "A": "-exp(a_log) in float64"}, out)


# ---------------------------------------------------------------------------- mHC

def mhc_case(w, seed, name, logit_range):
    rows, hc, h, iters, eps, rms_eps = 8, 4, 64, 20, 1e-6, 1e-6
    mix = (2 + hc) * hc
    rng = np.random.default_rng(seed)
    streams = rng.standard_normal((rows, hc, h)).astype(np.float32)
    fn = (rng.standard_normal((mix, hc * h)) / math.sqrt(hc * h)).astype(np.float32)
    base = (rng.standard_normal(mix) * 0.5).astype(np.float32)
    comb_bias = rng.uniform(0.0, logit_range, (hc, hc)).astype(np.float32)
    base[2 * hc:] = comb_bias.reshape(-1)
    scale = np.array([1.0, 1.0, 0.02 * logit_range], dtype=np.float32)
    cfg = deepseek_v4.DeepseekV4Config(hidden_size=h, hc_mult=hc, hc_sinkhorn_iters=iters,
                                       hc_eps=eps, rms_norm_eps=rms_eps)
    hcmod = deepseek_v4.DeepseekV4HyperConnection(cfg).double()
    with torch.no_grad():
        hcmod.fn.copy_(t64(fn))
        hcmod.base.copy_(t64(base))
        hcmod.scale.copy_(t64(scale))
        with fp64(deepseek_v4):
            post, comb, collapsed = hcmod(t64(streams).view(1, rows, hc, h))
    require_f64(post, comb, collapsed)
    w.case(name, "mhc", seed,
           ["transformers DeepseekV4HyperConnection.forward (post, comb, collapsed)"],
           {"rows": rows, "hc": hc, "h": h, "sinkhorn_iters": iters, "hc_eps": eps,
            "rms_eps": rms_eps, "logit_range": logit_range},
           {"streams": streams, "fn": fn, "bias": base, "scale": scale,
            "post": post[0].numpy(), "comb": comb[0].numpy(), "collapsed": collapsed[0].numpy()})


# ---------------------------------------------------------------------------- attention

class _Fixed(torch.nn.Module):
    """A projection replaced by its output: the attention module reads exactly our qkv values."""

    def __init__(self, value):
        super().__init__()
        self.value = value

    def forward(self, hidden_states):
        return self.value


def _mask(T, window):
    """transformers' own mask functions (masking_utils), as the additive float64 mask eager
    attention adds: causal, or sliding-window causal."""
    fn = (masking_utils.sliding_window_causal_mask_function(window) if window
          else masking_utils.causal_mask_function)
    q = torch.arange(T).view(T, 1)
    k = torch.arange(T).view(1, T)
    keep = fn(0, 0, q, k)
    return torch.where(keep, torch.tensor(0.0, dtype=torch.float64),
                       torch.tensor(-math.inf, dtype=torch.float64)).view(1, 1, T, T)


def attention_case(w, seed, name, module, attn, rotary, T, nq, nkv, hd, positions, functions,
                   params, q_norm=None, k_norm=None, gated=False, sinks=None, window=0):
    """Runs `attn` (a transformers attention module) in float64 on seeded BF16-exact q/k/v (and
    gate) projections in OUR qkv_output layout [Q | gate | K | V] (ops/attention.h), through
    eager attention with transformers' own causal / sliding mask. Stores the inputs, the RoPE
    frequencies transformers computed (inv_freq, attention_scaling), the Q/K transformers
    rotated (after its q_norm / k_norm) and the attention output before o_proj (after the gate)."""
    rng = np.random.default_rng(seed)
    q = bf16_round(rng.standard_normal((T, nq, hd)))
    k = bf16_round(rng.standard_normal((T, nkv, hd)))
    v = bf16_round(rng.standard_normal((T, nkv, hd)))
    parts = [q.reshape(T, -1)]
    if gated:
        gate = bf16_round(rng.standard_normal((T, nq, hd)))
        parts.append(gate.reshape(T, -1))
        # transformers' q_proj interleaves query and gate per head: [q_h | gate_h] for each h.
        q_out = np.concatenate([q, gate], axis=-1).reshape(1, T, -1)
    else:
        q_out = q.reshape(1, T, -1)
    parts += [k.reshape(T, -1), v.reshape(T, -1)]
    qkv = np.concatenate(parts, axis=1).astype(np.float32)
    recorded = {}
    rope_fn = module.apply_rotary_pos_emb

    def recording_rope(qs, ks, cos, sin, *a, **kw):
        qe, ke = rope_fn(qs, ks, cos, sin, *a, **kw)
        recorded["q"], recorded["k"] = qe, ke
        return qe, ke

    with torch.no_grad():
        attn.q_proj = _Fixed(t64(q_out))
        attn.k_proj = _Fixed(t64(k.reshape(1, T, -1)))
        attn.v_proj = _Fixed(t64(v.reshape(1, T, -1)))
        attn.o_proj = torch.nn.Identity()
        if q_norm is not None:
            attn.q_norm.weight.copy_(t64(q_norm))
            attn.k_norm.weight.copy_(t64(k_norm))
        if sinks is not None:
            attn.sinks.copy_(t64(sinks))
        attn.config._attn_implementation = "eager"
        hidden = torch.zeros((1, T, 1), dtype=torch.float64)
        pos = torch.from_numpy(np.asarray(positions, dtype=np.int64))
        module.apply_rotary_pos_emb = recording_rope
        try:
            with fp64(module, rope_utils_module):
                cos, sin = rotary(hidden, pos.view(pos.shape[0], 1, T) if pos.ndim == 2
                                  else pos.view(1, T))
                out, _ = attn(hidden_states=hidden, position_embeddings=(cos, sin),
                              attention_mask=_mask(T, window))
        finally:
            module.apply_rotary_pos_emb = rope_fn
    inv_freq = rotary.inv_freq
    require_f64(out, recorded["q"], recorded["k"], inv_freq, cos, sin)
    arrays = {"qkv": qkv, "positions": np.asarray(positions, dtype=np.int64).reshape(-1, T),
              "inv_freq": inv_freq.numpy(),
              "q_rope": recorded["q"][0].transpose(0, 1).numpy(),   # [T, nq, hd]
              "k_rope": recorded["k"][0].transpose(0, 1).numpy(),   # [T, nkv, hd]
              "out": out[0].numpy()}                                # [T, nq·hd]
    if q_norm is not None:
        arrays["q_norm"], arrays["k_norm"] = q_norm, k_norm
    if sinks is not None:
        arrays["sinks"] = sinks
    params = dict(params, T=T, nq=nq, nkv=nkv, hd=hd, gated=gated, window=window,
                  attention_factor=float(rotary.attention_scaling))
    w.case(name, "attention", seed, functions, params, arrays)


def qwen3_next_attention_case(w, seed):
    # Gated, partial rotary 0.25, qk_norm ((1 + w) weights), GQA 2 — the real config's theta.
    T, nq, nkv, hd, f, theta, eps = 20, 4, 2, 32, 0.25, 10000000.0, 1e-6
    cfg = qwen3_next.Qwen3NextConfig(hidden_size=64, num_attention_heads=nq, num_key_value_heads=nkv,
                                     head_dim=hd, partial_rotary_factor=f, rms_norm_eps=eps,
                                     rope_parameters={"rope_type": "default", "rope_theta": theta,
                                                      "partial_rotary_factor": f})
    rng = np.random.default_rng(seed + 1000)
    q_norm = bf16_round(rng.standard_normal(hd) * 0.25)
    k_norm = bf16_round(rng.standard_normal(hd) * 0.25)
    with fp64(qwen3_next):
        attn = qwen3_next.Qwen3NextAttention(cfg, layer_idx=3).double()
        rotary = qwen3_next.Qwen3NextRotaryEmbedding(cfg)
    positions = np.arange(T) + 7
    attention_case(w, seed, "attention_qwen3_next", qwen3_next, attn, rotary, T, nq, nkv, hd,
                   positions,
                   ["transformers Qwen3NextAttention.forward (eager, q_proj/k_proj/v_proj replaced "
                    "by their outputs, o_proj by identity)", "Qwen3NextRotaryEmbedding.forward",
                    "masking_utils.causal_mask_function"],
                   {"model_type": "qwen3_next", "rope_theta": theta, "partial_rotary_factor": f,
                    "rms_norm_eps": eps, "qk_norm": True},
                   q_norm=q_norm, k_norm=k_norm, gated=True)


def gpt_oss_attention_case(w, seed, sliding):
    # Sliding window (alternate layers), sinks, yarn with the real config's parameters.
    T, nq, nkv, hd, window = 20, 4, 2, 16, 6
    rope = {"rope_type": "yarn", "rope_theta": 150000.0, "factor": 32.0, "beta_fast": 32.0,
            "beta_slow": 1.0, "truncate": False, "original_max_position_embeddings": 4096}
    cfg = gpt_oss.GptOssConfig(hidden_size=64, num_attention_heads=nq, num_key_value_heads=nkv,
                               head_dim=hd, sliding_window=window, num_hidden_layers=2,
                               layer_types=["sliding_attention", "full_attention"],
                               rope_parameters=dict(rope), max_position_embeddings=131072)
    rng = np.random.default_rng(seed + 1000)
    sinks = bf16_round(rng.standard_normal(nq))
    with fp64(gpt_oss, rope_utils_module):
        attn = gpt_oss.GptOssAttention(cfg, layer_idx=0 if sliding else 1).double()
        rotary = gpt_oss.GptOssRotaryEmbedding(cfg)
    positions = np.arange(T) + 3
    attention_case(w, seed, "attention_gpt_oss_" + ("sliding" if sliding else "full"), gpt_oss,
                   attn, rotary, T, nq, nkv, hd, positions,
                   ["transformers GptOssAttention.forward (eager with sinks, projections replaced "
                    "by their outputs, o_proj by identity)", "GptOssRotaryEmbedding.forward (yarn)",
                    "masking_utils." + ("sliding_window_causal_mask_function" if sliding
                                        else "causal_mask_function")],
                   dict({"model_type": "gpt_oss", "sliding": sliding}, **rope),
                   sinks=sinks, window=window if sliding else 0)


def qwen2_5_vl_attention_case(w, seed):
    # MRoPE (sections [4, 6, 6] of hd/2 = 16), positions t != h != w.
    T, nq, nkv, hd, theta = 20, 4, 2, 32, 1000000.0
    section = [4, 6, 6]
    cfg = qwen2_5_vl.Qwen2_5_VLTextConfig(
        hidden_size=nq * hd, num_attention_heads=nq, num_key_value_heads=nkv,
        rope_parameters={"rope_type": "default", "rope_theta": theta, "mrope_section": section})
    with fp64(qwen2_5_vl):
        attn = qwen2_5_vl.Qwen2_5_VLAttention(cfg, layer_idx=0).double()
        rotary = qwen2_5_vl.Qwen2_5_VLRotaryEmbedding(cfg)
    i = np.arange(T)
    positions = np.stack([i + 3, i + 5 + i % 3, i + 9 + i % 7])
    attention_case(w, seed, "attention_qwen2_5_vl", qwen2_5_vl, attn, rotary, T, nq, nkv, hd,
                   positions,
                   ["transformers Qwen2_5_VLAttention.forward (eager, projections replaced by their "
                    "outputs, o_proj by identity)", "Qwen2_5_VLRotaryEmbedding.forward (MRoPE)",
                    "masking_utils.causal_mask_function"],
                   {"model_type": "qwen2_5_vl", "rope_theta": theta, "mrope_section": section})


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--bufferlab", required=True,
                    help="a built bufferlab binary: the compare cases take its dumped inputs")
    args = ap.parse_args()
    torch.manual_seed(0)
    if os.path.isdir(args.out):
        for entry in os.listdir(args.out):
            p = os.path.join(args.out, entry)
            if os.path.isdir(p):
                shutil.rmtree(p)
    os.makedirs(args.out, exist_ok=True)
    w = Writer(args.out)
    rmsnorm_case(w, 1601)
    qwen3_next_routing_case(w, 1602, True, "routing_qwen3_next")
    qwen3_next_routing_case(w, 1603, False, "routing_qwen3_next_unnormalised")
    deepseek_v3_routing_case(w, 1604)
    deepseek_v3_routing_case(w, 1617, "routing_deepseek_v3_bf16_logits", bf16_logits=True)
    deepseek_v3_compare_case(w, args.bufferlab, "fp32-gate", "routing_deepseek_v3_compare_x_bf16")
    deepseek_v3_compare_case(w, args.bufferlab, "fp32-routing",
                             "routing_deepseek_v3_compare_x_f32")
    qwen3_next_routing_case(w, 1618, True, "routing_qwen3_next_bf16_logits", bf16_logits=True)
    deepseek_v4_hash_case(w, 1610)
    longcat_zero_expert_case(w, 1611, "routing_longcat_zero_experts", 0.0)
    # LongCat ranks softmax probability + e_score_correction_bias (docs/golden.md, findings).
    longcat_zero_expert_case(w, 1612, "routing_longcat_zero_experts_biased", 0.02)
    gdn_case(w, 1605, "gdn_qwen3_next_gqa", nk=1, nv=2, kd=32, vd=32, L=40)
    gdn_case(w, 1606, "gdn_qwen3_next_chunked", nk=1, nv=1, kd=128, vd=128, L=80)
    gdn_gated_norm_case(w, 1613)
    conv_case(w, 1615, "gdn_conv_qwen3_next", qwen3_next, "gdn_conv", 64, False,
              {"nk": 1, "kd": 16, "nv": 2, "vd": 16})
    conv_case(w, 1616, "ssd_conv_nemotron_h", nemotron_h, "ssd_conv", 128, True,
              {"H": 4, "P": 16, "N": 16, "n_groups": 2})
    ssd_case(w, 1607)
    ssd_gated_norm_case(w, 1614)
    mhc_case(w, 1608, "mhc_deepseek_v4", 3.0)
    # A wider comb-logit range: the Sinkhorn converges slowly enough there that its iteration
    # count shows in the comb (the planted "one iteration too few" is judged on this case).
    mhc_case(w, 1609, "mhc_deepseek_v4_range12", 12.0)
    mhc_case(w, 1619, "mhc_deepseek_v4_range60", 60.0)
    qwen3_next_attention_case(w, 1620)
    gpt_oss_attention_case(w, 1621, True)
    gpt_oss_attention_case(w, 1622, False)
    qwen2_5_vl_attention_case(w, 1623)
    rope_cases(w, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data", "configs"))
    manifest = {
        "generator": "scripts/golden/make_golden.py",
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "flash-linear-attention": fla.__version__, "numpy": np.__version__},
        "evaluation": "float64 (torch.float32 / Tensor.float() mapped to float64 during each call)",
        "cases": w.cases,
    }
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
