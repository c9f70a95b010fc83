"""Byte-level writers and readers for the two weight formats bonfire loads.

safetensors: 8-byte little-endian header length, a JSON header (dtype, shape,
data_offsets per tensor, padded with spaces to a multiple of 8), then the raw
tensor bytes.

GGUF v3: magic "GGUF", version, tensor count, key/value count, the typed
key/value pairs, the tensor infos (dimensions listed fastest-first, i.e. the
reverse of the row-major shape), padding to the alignment, then the tensor
data with every tensor starting on an aligned offset.

The block quantizers reproduce ggml's reference quantizers bit for bit
(quantize_row_q8_0_ref, quantize_row_q4_0_ref, quantize_row_q6_K_ref): all the
arithmetic is done in float32 in the same order as the C code.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np

# --------------------------------------------------------------------------
# float conversions
# --------------------------------------------------------------------------


def f32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """Round float32 to bfloat16 (round to nearest, ties to even); returns the uint16 bits."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def bf16_bits_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def round_to_dtype(x: np.ndarray, dtype: str) -> np.ndarray:
    """The float32 values that survive a trip through `dtype` (F32, F16 or BF16)."""
    x = np.asarray(x, dtype=np.float32)
    if dtype == "F32":
        return x.copy()
    if dtype == "F16":
        return x.astype(np.float16).astype(np.float32)
    if dtype == "BF16":
        return bf16_bits_to_f32(f32_to_bf16_bits(x)).reshape(x.shape)
    raise ValueError(f"unknown dtype {dtype}")


# --------------------------------------------------------------------------
# safetensors
# --------------------------------------------------------------------------

_ST_ITEMSIZE = {"F32": 4, "F16": 2, "BF16": 2}


def write_safetensors(path: Path, tensors: dict[str, np.ndarray], dtype: str,
                      metadata: dict[str, str] | None = None) -> None:
    """Write float32 arrays as `dtype` tensors, in name order."""
    header: dict[str, Any] = {"__metadata__": metadata or {"format": "pt"}}
    blobs: list[bytes] = []
    offset = 0
    for name in sorted(tensors):
        arr = np.ascontiguousarray(tensors[name], dtype=np.float32)
        if dtype == "F32":
            raw = arr.astype("<f4").tobytes()
        elif dtype == "F16":
            raw = arr.astype("<f2").tobytes()
        elif dtype == "BF16":
            raw = f32_to_bf16_bits(arr).astype("<u2").tobytes()
        else:
            raise ValueError(f"unsupported safetensors dtype {dtype}")
        header[name] = {"dtype": dtype, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    head = json.dumps(header, separators=(",", ":")).encode("utf-8")
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for raw in blobs:
            f.write(raw)


def read_safetensors(path: Path) -> tuple[dict[str, np.ndarray], dict[str, dict]]:
    """Returns ({name: float32 array}, {name: header entry})."""
    data = Path(path).read_bytes()
    (n,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + n].decode("utf-8"))
    base = 8 + n
    out: dict[str, np.ndarray] = {}
    entries: dict[str, dict] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        raw = data[base + begin: base + end]
        dtype = entry["dtype"]
        if dtype == "F32":
            arr = np.frombuffer(raw, dtype="<f4").astype(np.float32)
        elif dtype == "F16":
            arr = np.frombuffer(raw, dtype="<f2").astype(np.float32)
        elif dtype == "BF16":
            arr = bf16_bits_to_f32(np.frombuffer(raw, dtype="<u2"))
        else:
            raise ValueError(f"{path}: unsupported dtype {dtype} for {name}")
        out[name] = arr.reshape(entry["shape"])
        entries[name] = entry
    return out, entries


# --------------------------------------------------------------------------
# GGUF value and tensor types
# --------------------------------------------------------------------------

class GGUFValueType:
    UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64 = range(13)


_SCALAR_FORMATS = {
    GGUFValueType.UINT8: "<B", GGUFValueType.INT8: "<b", GGUFValueType.UINT16: "<H",
    GGUFValueType.INT16: "<h", GGUFValueType.UINT32: "<I", GGUFValueType.INT32: "<i",
    GGUFValueType.FLOAT32: "<f", GGUFValueType.BOOL: "<?", GGUFValueType.UINT64: "<Q",
    GGUFValueType.INT64: "<q", GGUFValueType.FLOAT64: "<d",
}


class GGMLType:
    F32 = 0
    F16 = 1
    Q4_0 = 2
    Q8_0 = 8
    Q6_K = 14
    BF16 = 30


GGML_TYPE_NAMES = {GGMLType.F32: "F32", GGMLType.F16: "F16", GGMLType.Q4_0: "Q4_0",
                   GGMLType.Q8_0: "Q8_0", GGMLType.Q6_K: "Q6_K", GGMLType.BF16: "BF16"}

# (elements per block, bytes per block)
GGML_BLOCK = {GGMLType.F32: (1, 4), GGMLType.F16: (1, 2), GGMLType.BF16: (1, 2),
              GGMLType.Q4_0: (32, 18), GGMLType.Q8_0: (32, 34), GGMLType.Q6_K: (256, 210)}

# llama_ftype values as written to general.file_type
LLAMA_FTYPE = {"f32": 0, "f16": 1, "q4_0": 2, "q8_0": 7, "bf16": 32}

GGUF_DEFAULT_ALIGNMENT = 32


@dataclass
class KV:
    """One GGUF metadata entry. For arrays, `vtype` is ARRAY and `elem` the element type."""
    key: str
    vtype: int
    value: Any
    elem: int | None = None


def kv_u32(key: str, v: int) -> KV: return KV(key, GGUFValueType.UINT32, int(v))
def kv_i32(key: str, v: int) -> KV: return KV(key, GGUFValueType.INT32, int(v))
def kv_f32(key: str, v: float) -> KV: return KV(key, GGUFValueType.FLOAT32, float(v))
def kv_bool(key: str, v: bool) -> KV: return KV(key, GGUFValueType.BOOL, bool(v))
def kv_str(key: str, v: str) -> KV: return KV(key, GGUFValueType.STRING, v)
def kv_arr(key: str, elem: int, v: Iterable) -> KV: return KV(key, GGUFValueType.ARRAY, list(v), elem)


@dataclass
class GGUFTensor:
    name: str
    shape: tuple[int, ...]     # row-major (numpy) shape of the logical float tensor
    ggml_type: int
    data: bytes


@dataclass
class GGUFFile:
    kvs: list[KV] = field(default_factory=list)
    tensors: list[GGUFTensor] = field(default_factory=list)

    def set(self, kv: KV) -> None:
        """Add or replace (keeping the first position, as gguf-py's writer does)."""
        for i, old in enumerate(self.kvs):
            if old.key == kv.key:
                self.kvs[i] = kv
                return
        self.kvs.append(kv)

    def get(self, key: str) -> Any:
        for kv in self.kvs:
            if kv.key == key:
                return kv.value
        return None


def _pack_string(s: str | bytes) -> bytes:
    raw = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(raw)) + raw


def _pack_value(vtype: int, value: Any) -> bytes:
    if vtype == GGUFValueType.STRING:
        return _pack_string(value)
    return struct.pack(_SCALAR_FORMATS[vtype], value)


def _pack_kv(kv: KV) -> bytes:
    out = _pack_string(kv.key) + struct.pack("<I", kv.vtype)
    if kv.vtype == GGUFValueType.ARRAY:
        assert kv.elem is not None
        out += struct.pack("<IQ", kv.elem, len(kv.value))
        if kv.elem == GGUFValueType.STRING:
            out += b"".join(_pack_string(v) for v in kv.value)
        else:
            fmt = _SCALAR_FORMATS[kv.elem]
            out += np.asarray(kv.value, dtype=np.dtype(fmt)).tobytes()
    else:
        out += _pack_value(kv.vtype, kv.value)
    return out


def write_gguf(path: Path, gguf: GGUFFile, alignment: int = GGUF_DEFAULT_ALIGNMENT) -> None:
    infos = b""
    offset = 0
    offsets = []
    for t in gguf.tensors:
        offsets.append(offset)
        offset += len(t.data)
        offset += -offset % alignment
    for t, off in zip(gguf.tensors, offsets):
        ne = list(reversed(t.shape))
        infos += _pack_string(t.name) + struct.pack("<I", len(ne))
        infos += struct.pack(f"<{len(ne)}Q", *ne) + struct.pack("<IQ", t.ggml_type, off)
    header = b"GGUF" + struct.pack("<IQQ", 3, len(gguf.tensors), len(gguf.kvs))
    header += b"".join(_pack_kv(kv) for kv in gguf.kvs) + infos
    with open(path, "wb") as f:
        f.write(header)
        f.write(b"\0" * (-len(header) % alignment))
        for t in gguf.tensors:
            f.write(t.data)
            f.write(b"\0" * (-len(t.data) % alignment))


# --------------------------------------------------------------------------
# GGUF reader (used by the checker; keeps values typed)
# --------------------------------------------------------------------------

@dataclass
class GGUFTensorInfo:
    name: str
    ne: tuple[int, ...]
    ggml_type: int
    offset: int          # absolute offset in the file


class GGUFReader:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.buf = self.path.read_bytes()
        self.pos = 0
        magic = self.buf[:4]
        if magic != b"GGUF":
            raise ValueError(f"{path}: bad magic {magic!r}")
        self.pos = 4
        self.version, n_tensors, n_kv = self._unpack("<IQQ")
        self.kvs: dict[str, KV] = {}
        for _ in range(n_kv):
            key = self._string()
            (vtype,) = self._unpack("<I")
            if vtype == GGUFValueType.ARRAY:
                elem, n = self._unpack("<IQ")
                if elem == GGUFValueType.STRING:
                    value = [self._string() for _ in range(n)]
                else:
                    dt = np.dtype(_SCALAR_FORMATS[elem])
                    value = np.frombuffer(self.buf, dtype=dt, count=n, offset=self.pos).tolist()
                    self.pos += dt.itemsize * n
                self.kvs[key] = KV(key, vtype, value, elem)
            elif vtype == GGUFValueType.STRING:
                self.kvs[key] = KV(key, vtype, self._string())
            else:
                (value,) = self._unpack(_SCALAR_FORMATS[vtype])
                self.kvs[key] = KV(key, vtype, value)
        infos = []
        for _ in range(n_tensors):
            name = self._string()
            (n_dims,) = self._unpack("<I")
            ne = self._unpack(f"<{n_dims}Q")
            ggml_type, off = self._unpack("<IQ")
            infos.append((name, tuple(ne), ggml_type, off))
        align = self.kvs["general.alignment"].value if "general.alignment" in self.kvs else GGUF_DEFAULT_ALIGNMENT
        data_start = self.pos + (-self.pos % align)
        self.tensors = {n: GGUFTensorInfo(n, ne, t, data_start + off) for n, ne, t, off in infos}
        self.tensor_order = [i[0] for i in infos]

    def _unpack(self, fmt: str):
        vals = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return vals

    def _string(self) -> str:
        (n,) = self._unpack("<Q")
        raw = self.buf[self.pos:self.pos + n]
        self.pos += n
        return raw.decode("utf-8", errors="surrogateescape")

    def value(self, key: str, default: Any = None) -> Any:
        kv = self.kvs.get(key)
        return default if kv is None else kv.value

    def raw(self, name: str) -> bytes:
        info = self.tensors[name]
        n = int(np.prod(info.ne))
        per_block, block_bytes = GGML_BLOCK[info.ggml_type]
        size = n // per_block * block_bytes
        return self.buf[info.offset: info.offset + size]

    def dequantize(self, name: str) -> np.ndarray:
        """The tensor as float32 with the row-major shape (reverse of ne)."""
        info = self.tensors[name]
        shape = tuple(reversed(info.ne))
        return dequantize(self.raw(name), info.ggml_type).reshape(shape)


# --------------------------------------------------------------------------
# quantization (ggml reference layout)
# --------------------------------------------------------------------------

def _roundf(x: np.ndarray) -> np.ndarray:
    """C roundf: halves away from zero."""
    return np.sign(x) * np.floor(np.abs(x) + np.float32(0.5))


def quantize_q8_0(x: np.ndarray) -> bytes:
    """Block of 32: f16 d = amax/127, then 32 int8 round(x/d)."""
    blocks = np.ascontiguousarray(x, dtype=np.float32).reshape(-1, 32)
    amax = np.abs(blocks).max(axis=1)
    d = (amax / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    q = _roundf((blocks * inv[:, None]).astype(np.float32)).astype(np.int8)
    out = np.empty((blocks.shape[0], 34), dtype=np.uint8)
    out[:, :2] = d.astype("<f2").view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out.tobytes()


def quantize_q4_0(x: np.ndarray) -> bytes:
    """Block of 32: d = (value of largest magnitude) / -8, nibbles q = min(15, trunc(x/d + 8.5));
    element j goes to the low nibble of byte j and element j+16 to its high nibble."""
    blocks = np.ascontiguousarray(x, dtype=np.float32).reshape(-1, 32)
    idx = np.abs(blocks).argmax(axis=1)                 # first of equal magnitudes, like the C loop
    vmax = blocks[np.arange(blocks.shape[0]), idx]
    d = (vmax / np.float32(-8)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    scaled = (blocks * inv[:, None]).astype(np.float32) + np.float32(8.5)
    q = np.minimum(15, np.trunc(scaled.astype(np.float32)).astype(np.int8)).astype(np.uint8)
    out = np.empty((blocks.shape[0], 18), dtype=np.uint8)
    out[:, :2] = d.astype("<f2").view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q[:, :16] | (q[:, 16:] << 4)
    return out.tobytes()


def _nearest_int(v: np.ndarray) -> np.ndarray:
    """ggml's nearest_int: add 1.5*2^23 in float32 and read the low mantissa bits."""
    val = (v.astype(np.float32) + np.float32(12582912.0)).astype(np.float32)
    return (val.view(np.int32) & 0x007FFFFF) - 0x00400000


def _make_qx_quants_rmse1(x: np.ndarray, nmax: int) -> tuple[np.ndarray, np.ndarray]:
    """make_qx_quants(n, nmax, x, L, rmse_type=1, NULL) for many groups at once.
    x: (groups, n) float32. Returns (scale per group, L per element as int8 in [0, 2*nmax))."""
    g, n = x.shape
    f32 = np.float32
    ax = np.abs(x)
    idx = ax.argmax(axis=1)
    amax = ax[np.arange(g), idx]
    vmax = x[np.arange(g), idx]
    zero = amax < f32(1e-15)
    safe_max = np.where(zero, f32(1), vmax).astype(f32)
    w = (x * x).astype(f32)

    def quant(iscale):
        l = _nearest_int((iscale[:, None] * x).astype(f32))
        return np.clip(l, -nmax, nmax - 1)

    def sums(l):
        sumlx = np.zeros(g, dtype=f32)
        suml2 = np.zeros(g, dtype=f32)
        lf = l.astype(f32)
        for i in range(n):           # sequential float32 accumulation, as in C
            sumlx = (sumlx + ((w[:, i] * x[:, i]).astype(f32) * lf[:, i]).astype(f32)).astype(f32)
            suml2 = (suml2 + ((w[:, i] * lf[:, i]).astype(f32) * lf[:, i]).astype(f32)).astype(f32)
        return sumlx, suml2

    iscale = (f32(-nmax) / safe_max).astype(f32)
    l = quant(iscale)
    L = (l + nmax).astype(np.int8)
    sumlx, suml2 = sums(l)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(suml2 != 0, (sumlx / suml2).astype(f32), f32(0)).astype(f32)
    best = (scale * sumlx).astype(f32)
    for step in range(-9, 10):
        if step == 0:
            continue
        iscale = (-(f32(nmax) + (f32(0.1) * f32(step)).astype(f32)) / safe_max).astype(f32)
        l = quant(iscale)
        sumlx, suml2 = sums(l)
        better = (suml2 > 0) & ((sumlx * sumlx).astype(f32) > (best * suml2).astype(f32))
        if better.any():
            L[better] = (l[better] + nmax).astype(np.int8)
            with np.errstate(divide="ignore", invalid="ignore"):
                new_scale = (sumlx / suml2).astype(f32)
            scale = np.where(better, new_scale, scale).astype(f32)
            best = np.where(better, (scale * sumlx).astype(f32), best).astype(f32)
    scale = np.where(zero, f32(0), scale).astype(f32)
    L[zero] = 0
    return scale, L


def quantize_q6_K(x: np.ndarray) -> bytes:
    """ggml's quantize_row_q6_K_ref: 256-element super-blocks of 16 groups of 16."""
    f32 = np.float32
    sb = np.ascontiguousarray(x, dtype=f32).reshape(-1, 256)
    nb = sb.shape[0]
    groups = sb.reshape(nb * 16, 16)
    scales, L = _make_qx_quants_rmse1(groups, 32)
    scales = scales.reshape(nb, 16)
    L = L.reshape(nb, 256).astype(np.int32)
    abs_s = np.abs(scales)
    pick = abs_s.argmax(axis=1)
    max_abs = abs_s[np.arange(nb), pick]
    max_scale = scales[np.arange(nb), pick]
    out = np.zeros((nb, 210), dtype=np.uint8)
    for i in range(nb):
        if max_abs[i] < f32(1e-15):
            continue                                  # all-zero block: every byte 0
        iscale = f32(f32(-128.0) / max_scale[i])
        d16 = np.float16(f32(1) / iscale)
        q_scales = np.minimum(127, _nearest_int((iscale * scales[i]).astype(f32))).astype(np.int8)
        Li = L[i].copy()
        for j in range(16):
            d = f32(f32(d16) * f32(q_scales[j]))
            if d == 0:
                continue
            l = _nearest_int((sb[i, 16 * j:16 * j + 16] / d).astype(f32))
            Li[16 * j:16 * j + 16] = np.clip(l, -32, 31) + 32
        ql = np.zeros(128, dtype=np.uint8)
        qh = np.zeros(64, dtype=np.uint8)
        for half in range(2):
            base = 128 * half
            Lh = Li[base:base + 128]
            q1, q2, q3, q4 = (Lh[0:32] & 0xF, Lh[32:64] & 0xF, Lh[64:96] & 0xF, Lh[96:128] & 0xF)
            ql[64 * half: 64 * half + 32] = q1 | (q3 << 4)
            ql[64 * half + 32: 64 * half + 64] = q2 | (q4 << 4)
            qh[32 * half: 32 * half + 32] = ((Lh[0:32] >> 4) | ((Lh[32:64] >> 4) << 2)
                                             | ((Lh[64:96] >> 4) << 4) | ((Lh[96:128] >> 4) << 6))
        out[i, 0:128] = ql
        out[i, 128:192] = qh
        out[i, 192:208] = q_scales.view(np.uint8)
        out[i, 208:210] = np.array([d16], dtype="<f2").view(np.uint8)
    return out.tobytes()


def encode_tensor(x: np.ndarray, ggml_type: int) -> bytes:
    x = np.ascontiguousarray(x, dtype=np.float32)
    if ggml_type == GGMLType.F32:
        return x.astype("<f4").tobytes()
    if ggml_type == GGMLType.F16:
        return x.astype("<f2").tobytes()
    if ggml_type == GGMLType.BF16:
        return f32_to_bf16_bits(x).astype("<u2").tobytes()
    if ggml_type == GGMLType.Q8_0:
        return quantize_q8_0(x)
    if ggml_type == GGMLType.Q4_0:
        return quantize_q4_0(x)
    if ggml_type == GGMLType.Q6_K:
        return quantize_q6_K(x)
    raise ValueError(f"cannot encode ggml type {ggml_type}")


def dequantize(raw: bytes, ggml_type: int) -> np.ndarray:
    if ggml_type == GGMLType.F32:
        return np.frombuffer(raw, dtype="<f4").astype(np.float32)
    if ggml_type == GGMLType.F16:
        return np.frombuffer(raw, dtype="<f2").astype(np.float32)
    if ggml_type == GGMLType.BF16:
        return bf16_bits_to_f32(np.frombuffer(raw, dtype="<u2"))
    if ggml_type == GGMLType.Q8_0:
        b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 34)
        d = b[:, :2].copy().view("<f2").astype(np.float32)
        return (b[:, 2:].view(np.int8).astype(np.float32) * d).reshape(-1)
    if ggml_type == GGMLType.Q4_0:
        b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 18)
        d = b[:, :2].copy().view("<f2").astype(np.float32)
        qs = b[:, 2:]
        q = np.concatenate([qs & 0xF, qs >> 4], axis=1).astype(np.float32) - 8
        return (q * d).reshape(-1)
    if ggml_type == GGMLType.Q6_K:
        b = np.frombuffer(raw, dtype=np.uint8).reshape(-1, 210)
        out = np.empty((b.shape[0], 256), dtype=np.float32)
        for i in range(b.shape[0]):
            ql, qh = b[i, 0:128].astype(np.int32), b[i, 128:192].astype(np.int32)
            sc = b[i, 192:208].view(np.int8).astype(np.float32)
            d = np.float32(b[i, 208:210].copy().view("<f2")[0])
            for half in range(2):
                lq, hq = ql[64 * half: 64 * half + 64], qh[32 * half: 32 * half + 32]
                q1 = ((lq[0:32] & 0xF) | (((hq >> 0) & 3) << 4)) - 32
                q2 = ((lq[32:64] & 0xF) | (((hq >> 2) & 3) << 4)) - 32
                q3 = ((lq[0:32] >> 4) | (((hq >> 4) & 3) << 4)) - 32
                q4 = ((lq[32:64] >> 4) | (((hq >> 6) & 3) << 4)) - 32
                for k, q in enumerate((q1, q2, q3, q4)):
                    pos = 128 * half + 32 * k
                    s = sc[(pos // 16)], sc[(pos // 16) + 1]
                    out[i, pos:pos + 16] = d * s[0] * q[:16]
                    out[i, pos + 16:pos + 32] = d * s[1] * q[16:]
        return out.reshape(-1)
    raise ValueError(f"cannot decode ggml type {ggml_type}")
