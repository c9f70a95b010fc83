#!/usr/bin/env python3
"""Writes goldens/safetensors/: small .safetensors files (f32, f16, bf16, a
scalar, an empty tensor, __metadata__, a sharded pair with its index) and the
values PyTorch holds for them, for tests/safetensors_test.cpp.

Run: /usr/bin/python3 scripts/gen_safetensors_goldens.py  (needs python3-torch)
The file format is written by hand from the safetensors spec: an 8-byte
little-endian header length, a JSON header, then the raw little-endian data.
"""
import json
import os
import struct

import torch

OUT = os.path.join(os.path.dirname(__file__), "..", "goldens", "safetensors")
DT = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.int8: "I8", torch.uint8: "U8"}


def raw_bytes(t):
    t = t.contiguous()
    if t.dtype == torch.bfloat16:  # numpy has no bf16: go through int16 bits
        return t.view(torch.int16).numpy().tobytes()
    return t.numpy().tobytes()


def write(path, tensors, metadata=None, pad_to=8):
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, t in tensors.items():
        b = raw_bytes(t)
        header[name] = {"dtype": DT[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((-len(h)) % pad_to)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def expected(tensors):
    return {n: {"shape": list(t.shape) or [1], "data": [float(v) for v in t.float().flatten().tolist()]}
            for n, t in tensors.items()}


def main():
    os.makedirs(OUT, exist_ok=True)
    g = torch.Generator().manual_seed(7)
    mixed = {
        "model.embed_tokens.weight": torch.randn(8, 16, generator=g),
        "model.layers.0.self_attn.q_proj.weight": torch.randn(16, 16, generator=g).half(),
        "model.norm.weight": (torch.randn(16, generator=g) * 0.1 + 1).bfloat16(),
        "scalar": torch.tensor(3.25),
        "empty": torch.zeros(0, 4),
        "qweight_i8": torch.randint(-128, 128, (4, 8), generator=g, dtype=torch.int8),
        "qzeros_u8": torch.randint(0, 256, (2, 8), generator=g, dtype=torch.uint8),
    }
    write(os.path.join(OUT, "mixed.safetensors"), mixed, metadata={"format": "pt"})
    # An odd header length, so f32 data starts unaligned (the reader must cope).
    odd = {"a": torch.randn(3, 5, generator=g)}
    write(os.path.join(OUT, "unaligned.safetensors"), odd, pad_to=1)
    shard1 = {"w1": torch.randn(4, 4, generator=g)}
    shard2 = {"w2": torch.randn(2, 8, generator=g).half()}
    os.makedirs(os.path.join(OUT, "sharded"), exist_ok=True)
    write(os.path.join(OUT, "sharded", "model-00001-of-00002.safetensors"), shard1)
    write(os.path.join(OUT, "sharded", "model-00002-of-00002.safetensors"), shard2)
    with open(os.path.join(OUT, "sharded", "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0},
                   "weight_map": {"w1": "model-00001-of-00002.safetensors",
                                  "w2": "model-00002-of-00002.safetensors"}}, f, indent=1)
    exp = {"mixed.safetensors": expected(mixed), "unaligned.safetensors": expected(odd),
           "sharded": expected({**shard1, **shard2})}
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(exp, f)


if __name__ == "__main__":
    main()
