"""One Llama decoder layer with a KV cache: prefill + 3 decode steps."""
from .common import *  # noqa: F401,F403
from .elementwise import *  # noqa: F401,F403
from .norms import *  # noqa: F401,F403
from .rope import *  # noqa: F401,F403
from .attention import *  # noqa: F401,F403


# ---------------------------------------------------------------- Llama layer


def llama_layer_golden():
    R = rng_for("llama_layer")
    C, H, KV, D, I, base, eps, maxLen = 64, 4, 2, 16, 128, 10000.0, 1e-5, 16

    def lin(o, i):
        return rn(R, (o, i), 1.0 / math.sqrt(i))

    W = {
        "input_layernorm": rn(R, (C,), 0.1) + F32(1),
        "q_proj": lin(H * D, C), "k_proj": lin(KV * D, C), "v_proj": lin(KV * D, C), "o_proj": lin(C, H * D),
        "post_attention_layernorm": rn(R, (C,), 0.1) + F32(1),
        "gate_proj": lin(I, C), "up_proj": lin(I, C), "down_proj": lin(C, I),
    }

    def graph(prefill):
        nodes = []
        if prefill:
            nodes += [node("k_zeros", "zeros", [], shape=[maxLen, KV * D]),
                      node("v_zeros", "zeros", [], shape=[maxLen, KV * D])]
            kc, vc = "k_zeros", "v_zeros"
        else:
            kc, vc = "s:k_cache", "s:v_cache"
        nodes += [
            node("h", "rmsnorm", ["x", "w:input_layernorm"], eps=eps),
            node("q", "matmul", ["h", "w:q_proj"], transB=True),
            node("k", "matmul", ["h", "w:k_proj"], transB=True),
            node("v", "matmul", ["h", "w:v_proj"], transB=True),
            node("qr", "rope", ["q"], headDim=D, base=base, offset="pos"),
            node("kr", "rope", ["k"], headDim=D, base=base, offset="pos"),
            node("kc", "cache_write", [kc, "kr"], offset="pos"),
            node("vc", "cache_write", [vc, "v"], offset="pos"),
            node("att", "attention", ["qr", "kc", "vc"], heads=H, headDim=D, kvHeads=KV, posOffset="pos"),
            node("o", "matmul", ["att", "w:o_proj"], transB=True),
            node("h1", "add", ["x", "o"]),
            node("h2", "rmsnorm", ["h1", "w:post_attention_layernorm"], eps=eps),
            node("g", "matmul", ["h2", "w:gate_proj"], transB=True),
            node("u", "matmul", ["h2", "w:up_proj"], transB=True),
            node("act", "swiglu", ["g", "u"]),
            node("d", "matmul", ["act", "w:down_proj"], transB=True),
            node("y", "add", ["h1", "d"]),
        ]
        validate(nodes)
        assert features(nodes) == []
        g = {"inputs": {}, "weights": {k: tj(v) for k, v in W.items()}, "nodes": nodes, "outputs": ["y"],
             "bind": {"pos": 0 if prefill else 5}, "session": "layer"}
        if prefill:
            g["retain"] = {"k_cache": "kc", "v_cache": "vc"}
        return g

    # HF Llama decoder layer, float64 (inv_freq / angles float32 as HF's LlamaRotaryEmbedding)
    def hf_layer(x):
        N = x.shape[0]
        X = t64(x)
        Wt = {k: t64(v) for k, v in W.items()}

        def rms(h, w):
            return h * torch.rsqrt((h * h).mean(-1, keepdim=True) + eps) * w

        h = rms(X, Wt["input_layernorm"])
        q = (h @ Wt["q_proj"].T).view(N, H, D).transpose(0, 1)
        k = (h @ Wt["k_proj"].T).view(N, KV, D).transpose(0, 1)
        v = (h @ Wt["v_proj"].T).view(N, KV, D).transpose(0, 1)
        inv = 1.0 / (base ** (torch.arange(0, D, 2, dtype=torch.int64).float() / D))
        freqs = torch.arange(N, dtype=torch.int64).float()[:, None] * inv[None, :]
        emb = torch.cat((freqs, freqs), -1).to(F64)
        cos, sin = emb.cos(), emb.sin()

        def rot_half(t):
            return torch.cat((-t[..., D // 2:], t[..., :D // 2]), -1)

        q = q * cos + rot_half(q) * sin
        k = k * cos + rot_half(k) * sin
        k = k.repeat_interleave(H // KV, 0)
        v = v.repeat_interleave(H // KV, 0)
        sc = q @ k.transpose(1, 2) / math.sqrt(D)
        sc = sc.masked_fill(torch.triu(torch.ones(N, N, dtype=torch.bool), 1), -math.inf)
        a = torch.softmax(sc, -1) @ v
        a = a.transpose(0, 1).reshape(N, H * D)
        h1 = X + a @ Wt["o_proj"].T
        h2 = rms(h1, Wt["post_attention_layernorm"])
        m = (torch.nn.functional.silu(h2 @ Wt["gate_proj"].T) * (h2 @ Wt["up_proj"].T)) @ Wt["down_proj"].T
        return h1 + m

    # the same step through this script's op references (cache + posOffset), as a cross-check
    def op_chain(x, pos, kcache, vcache):
        h = rmsnorm_ref(x, W["input_layernorm"], eps)
        q = npf(h @ t64(W["q_proj"]).T)
        k = npf(h @ t64(W["k_proj"]).T)
        v = npf(h @ t64(W["v_proj"]).T)
        qr = npf(rope_ref(q, D, base, pos))
        kr = npf(rope_ref(k, D, base, pos))
        kcache[pos:pos + x.shape[0]] = kr
        vcache[pos:pos + x.shape[0]] = v
        # attention_ref takes f32 inputs; compare loosely
        a = attention_ref(qr, kcache, vcache, H, D, KV, posOffset=pos)
        h1 = t64(x) + a @ t64(W["o_proj"]).T
        h2 = rmsnorm_ref(npf(h1), W["post_attention_layernorm"], eps)
        m = (torch.nn.functional.silu(h2 @ t64(W["gate_proj"]).T) * (h2 @ t64(W["up_proj"]).T)) @ t64(
            W["down_proj"]).T
        return h1 + m

    xs = [rn(R, (5, C)), rn(R, (1, C)), rn(R, (1, C)), rn(R, (1, C))]
    steps = []
    pos = 0
    kcache = np.zeros((maxLen, KV * D), np.float64)
    vcache = np.zeros((maxLen, KV * D), np.float64)
    for x in xs:
        allx = np.concatenate(xs, 0)[:pos + x.shape[0]]
        y = hf_layer(allx)[pos:]
        y2 = op_chain(x, pos, kcache, vcache)
        assert torch.allclose(y, y2, atol=1e-5), float((y - y2).abs().max())
        steps.append({"bind": {"pos": pos}, "x": tj(x), "y": tj(y)})
        pos += x.shape[0]
    return {"tol": tol(1e-4, 1e-4), "prefill": graph(True), "decode": graph(False), "steps": steps}
