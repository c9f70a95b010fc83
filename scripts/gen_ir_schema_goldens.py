#!/usr/bin/env python3
"""Writes goldens/ir_schema/cases.jsonl: deterministic (seeded) mutations of
the hand-made IR documents in tests/ir/docs/, each with the verdict of
python3-jsonschema's Draft202012Validator against spec/ir.schema.json, for
tests/ir_validate_test.cpp (bonfire's valijson-based check_schema must agree).

Run: /usr/bin/python3 scripts/gen_ir_schema_goldens.py  (needs python3-jsonschema)

One JSON object per line: {"id", "mutation", "doc", "valid"}. Mutations:
deleted keys (required or not), wrong JSON types, out-of-enum strings,
zero/negative/fractional integers, integral floats (4.0 is an integer in
2020-12), unknown keys, `_` prose keys (allowed anywhere), per_layer objects
(wrapped values, extra keys, non-array lists), empty names, changed ops and
slot kinds, nested changes in nodes, slots, tokenizer, inputs/outputs and
modes, dropped/duplicated nodes and combinations of two or three of these;
then fixed cases of whole numbers beyond 64 bits.
To keep the file small, a variant's block keeps at most a few nodes beside
the one it mutates (removing nodes never changes the schema verdict).
"""
import copy
import json
import os
import random

from jsonschema import Draft202012Validator

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DOCS = ["llama", "sliding", "moe", "mla", "all_ops"]
OUT = os.path.join(ROOT, "goldens", "ir_schema", "cases.jsonl")
SEED = 20240617
N_CASES = 800
MAX_NODES = 6  # block nodes kept beside the mutated one

ENUM_KEYS = {"op", "kind", "pairing", "rope_heads", "approx", "gate_norm", "activation", "scoring", "route", "gate",
             "feature_map", "mask", "tensor_index", "evict", "kv_rows", "dtype", "init"}
NAME_KEYS = {"out", "weight", "bias", "state", "router", "k_b", "v_b", "a", "b", "c", "d", "tied_to", "name",
             "selection_bias", "state_weight", "gate", "up", "down"}
OTHER_TYPES = ["text", 7, 2.5, True, False, None, [], {}, [1, "x"], {"k": 1}]


def paths(v, p=()):
    """Every (path, value) below v, v included."""
    yield p, v
    if isinstance(v, dict):
        for k, x in v.items():
            yield from paths(x, p + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from paths(x, p + (i,))


def get(doc, p):
    for k in p:
        doc = doc[k]
    return doc


def put(doc, p, value):
    get(doc, p[:-1])[p[-1]] = value


def fmt(p):
    s = "$"
    for k in p:
        s += f"[{k}]" if isinstance(k, int) else f".{k}"
    return s


def pick(rng, items):
    return rng.choice(items) if items else None


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


# Each mutation changes doc in place and returns its description, or None when
# it finds nothing to change.

def m_delete_key(doc, rng):
    objs = [(p, v) for p, v in paths(doc) if isinstance(v, dict) and v]
    p, v = pick(rng, objs)
    k = rng.choice(list(v))
    del v[k]
    return f"delete {fmt(p + (k,))}"


def m_delete_required(doc, rng):
    cands = []
    for p, v in paths(doc):
        if isinstance(v, dict):
            for k in ("op", "in", "out", "kind", "name", "nodes", "repeat", "weight", "eps", "heads", "state", "sizes",
                      "vocab", "d", "ctx", "n_layers", "tensors", "shape", "init", "window", "sinks", "max_len",
                      "ir_version", "family_hint", "model", "embed", "block", "head", "expr", "router", "experts",
                      "theta", "pairing", "rope_heads", "scale", "causal", "op", "top_k", "per_layer"):
                if k in v:
                    cands.append((p, k))
    p, k = pick(rng, cands)
    del get(doc, p)[k]
    return f"delete {fmt(p + (k,))}"


def m_wrong_type(doc, rng):
    cands = [p for p, v in paths(doc) if p]
    p = pick(rng, cands)
    old = get(doc, p)
    choices = [t for t in OTHER_TYPES if type(t) is not type(old)]
    new = copy.deepcopy(rng.choice(choices))
    put(doc, p, new)
    return f"{fmt(p)} = {json.dumps(new)} (was {type(old).__name__})"


def m_bad_enum(doc, rng):
    cands = [p for p, v in paths(doc) if p and isinstance(p[-1], str) and p[-1] in ENUM_KEYS and isinstance(v, str)]
    cands += [p for p, v in paths(doc) if len(p) >= 2 and p[-2] == "per_layer" and isinstance(v, str)]
    p = pick(rng, cands)
    if p is None:
        return None
    old = get(doc, p)
    new = rng.choice([old.upper(), old + "_x", "bogus", "", " " + old])
    put(doc, p, new)
    return f"{fmt(p)} = {json.dumps(new)} (enum)"


def m_int_bad(doc, rng):
    cands = [p for p, v in paths(doc) if p and is_int(v)]
    p = pick(rng, cands)
    old = get(doc, p)
    new = rng.choice([0, -1, -old - 1, old + 0.5, 0.5])
    put(doc, p, new)
    return f"{fmt(p)} = {json.dumps(new)} (was {old})"


def m_int_float(doc, rng):
    cands = [p for p, v in paths(doc) if p and is_int(v)]
    p = pick(rng, cands)
    old = get(doc, p)
    put(doc, p, float(old))
    return f"{fmt(p)} = {float(old)!r} (integral float)"


def m_unknown_key(doc, rng):
    objs = [(p, v) for p, v in paths(doc) if isinstance(v, dict)]
    p, v = pick(rng, objs)
    k = rng.choice(["bogus", "Weight", "extra", "eps2", "x_"])
    v[k] = rng.choice([1, "x", None])
    return f"add unknown key {fmt(p + (k,))}"


def m_prose_key(doc, rng):
    objs = [(p, v) for p, v in paths(doc) if isinstance(v, dict)]
    p, v = pick(rng, objs)
    k = rng.choice(["_", "_note", "_why"])
    v[k] = rng.choice(["prose", {"any": ["thing", 1]}, 3, None])
    return f"add prose key {fmt(p + (k,))}"


def per_layer_fields(doc):
    """Scalar fields of block nodes and slots that a per_layer may replace."""
    out = []
    for sec in ("nodes", "state"):
        for i, n in enumerate(doc.get("block", {}).get(sec, [])):
            if not isinstance(n, dict):
                continue
            for k, v in n.items():
                if k in ("op", "in", "out", "name", "kind", "state") or k.startswith("_"):
                    continue
                if isinstance(v, (int, float, str, bool)) and not (isinstance(v, str) and k in NAME_KEYS):
                    out.append(("block", sec, i, k))
    return out


def n_layers(doc):
    try:
        return int(doc["model"]["n_layers"])
    except Exception:
        return 2


def m_wrap_per_layer(doc, rng):
    p = pick(rng, per_layer_fields(doc))
    if p is None:
        return None
    v = get(doc, p)
    put(doc, p, {"per_layer": [v] * n_layers(doc)})
    return f"wrap {fmt(p)} in per_layer"


def existing_per_layers(doc):
    return [p for p, v in paths(doc) if isinstance(v, dict) and "per_layer" in v]


def m_per_layer_extra(doc, rng):
    p = pick(rng, existing_per_layers(doc))
    if p is None:
        q = pick(rng, per_layer_fields(doc))
        if q is None:
            return None
        put(doc, q, {"per_layer": [get(doc, q)] * n_layers(doc)})
        p = q
    k = rng.choice(["extra", "layers", "_note", "_"])
    get(doc, p)[k] = "x"
    return f"per_layer {fmt(p)} gets key {k}"


def m_per_layer_bad(doc, rng):
    p = pick(rng, existing_per_layers(doc) + per_layer_fields(doc))
    if p is None:
        return None
    new = rng.choice([{"per_layer": 3}, {"per_layer": "abc"}, {"per_layer": None}, {"per_layers": [1, 2]}, {},
                      {"per_layer": []}, {"per_layer": [None, "x"]}])
    put(doc, p, copy.deepcopy(new))
    return f"{fmt(p)} = {json.dumps(new)}"


def m_empty_name(doc, rng):
    cands = [p for p, v in paths(doc) if isinstance(v, str) and p and (
        (isinstance(p[-1], str) and p[-1] in NAME_KEYS) or (len(p) >= 2 and p[-2] in ("in", "out", "inputs", "outputs")))]
    p = pick(rng, cands)
    if p is None:
        return None
    put(doc, p, "")
    return f"{fmt(p)} = \"\""


def m_change_number(doc, rng):
    cands = [p for p, v in paths(doc) if p and isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0]
    p = pick(rng, cands)
    old = get(doc, p)
    new = old * 2 if is_int(old) else old * 1.5
    put(doc, p, new)
    return f"{fmt(p)} = {new!r} (was {old!r})"


OPS = None


def m_swap_op(doc, rng):
    cands = [("embed", "nodes", i) for i in range(len(doc["embed"]["nodes"]))]
    cands += [("block", "nodes", i) for i in range(len(doc["block"]["nodes"]))]
    cands += [("head", "nodes", i) for i in range(len(doc["head"]["nodes"]))]
    p = pick(rng, cands)
    if p is None:
        return None
    n = get(doc, p)
    new = rng.choice([o for o in OPS if o != n.get("op")])
    n["op"] = new
    return f"{fmt(p)}.op = {new}"


def m_swap_kind(doc, rng):
    slots = doc["block"].get("state", [])
    if not slots:
        return None
    i = rng.randrange(len(slots))
    s = slots[i]
    s["kind"] = "recurrent" if s.get("kind") == "kv" else "kv"
    return f"$.block.state[{i}].kind = {s['kind']}"


def m_drop_node(doc, rng):
    sec = rng.choice(["embed", "block", "head"])
    nodes = doc[sec]["nodes"]
    if not nodes:
        return None
    i = rng.randrange(len(nodes))
    del nodes[i]
    return f"drop $.{sec}.nodes[{i}]"


def m_dup_node(doc, rng):
    sec = rng.choice(["embed", "block", "head"])
    nodes = doc[sec]["nodes"]
    if not nodes:
        return None
    i = rng.randrange(len(nodes))
    nodes.insert(i, copy.deepcopy(nodes[i]))
    return f"duplicate $.{sec}.nodes[{i}]"


def m_empty_array(doc, rng):
    cands = [p for p, v in paths(doc) if p and isinstance(v, list) and v]
    p = pick(rng, cands)
    put(doc, p, [])
    return f"{fmt(p)} = []"


def m_tokenizer(doc, rng):
    t = doc.setdefault("tokenizer", {})
    choice = rng.randrange(9)
    if choice == 0:
        t["bos"] = None
        return "tokenizer.bos = null"
    if choice == 1:
        t["bos"] = rng.choice(["1", 1.5, True, 3.0])
        return f"tokenizer.bos = {json.dumps(t['bos'])}"
    if choice == 2:
        t.setdefault("specials", {})["eos"] = rng.choice(["2", 2.0, None, -3])
        return f"tokenizer.specials.eos = {json.dumps(t['specials']['eos'])}"
    if choice == 3:
        t.setdefault("specials", {})["_note"] = rng.choice(["prose", 4])
        return "tokenizer.specials._note added"
    if choice == 4:
        t["vocab_file"] = "x"
        return "tokenizer.vocab_file (unknown key)"
    if choice == 5:
        t["type"] = rng.choice(["wordpiece", 3, None])
        return f"tokenizer.type = {json.dumps(t['type'])}"
    if choice == 6:
        doc["tokenizer"] = rng.choice(["bpe", [], None, {}])
        return f"tokenizer = {json.dumps(doc['tokenizer'])}"
    if choice == 7:
        t["specials"] = rng.choice([[], {"pad": 0, "unk": 1}, {"a": "b"}])
        return f"tokenizer.specials = {json.dumps(t['specials'])}"
    t["_"] = "prose"
    return "tokenizer._ added"


def m_io(doc, rng):
    key = rng.choice(["inputs", "outputs"])
    lst = doc.setdefault(key, ["tokens"] if key == "inputs" else ["logits"])
    if not isinstance(lst, list):
        return None
    choice = rng.randrange(8)
    if choice == 0:
        lst.append({"name": "extra", "kind": "f32", "note": "a note"})
        return f"{key} += io object"
    if choice == 1:
        lst.append({"kind": "f32"})
        return f"{key} += io object without name"
    if choice == 2:
        lst.append({"name": "extra", "shape": [1]})
        return f"{key} += io object with unknown key"
    if choice == 3:
        lst.append(rng.choice([3, None, ["x"]]))
        return f"{key} += {json.dumps(lst[-1])}"
    if choice == 4:
        lst.append({"name": 3})
        return f"{key} += io with numeric name"
    if choice == 5:
        lst.append({"name": "", "_": "empty names are strings"})
        return f"{key} += io with empty name"
    if choice == 6:
        doc[key] = rng.choice(["tokens", {"name": "tokens"}, []])
        return f"{key} = {json.dumps(doc[key])}"
    lst.append("")
    return f"{key} += \"\""


def m_modes(doc, rng):
    m = doc.setdefault("modes", {})
    if not isinstance(m, dict):
        return None
    choice = rng.randrange(4)
    if choice == 0:
        m["verify"] = "speculative verification"
        return "modes.verify (string)"
    if choice == 1:
        m["decode"] = rng.choice([1, None, True])
        return f"modes.decode = {json.dumps(m['decode'])}"
    if choice == 2:
        doc["modes"] = rng.choice([["prefill"], "prefill"])
        return f"modes = {json.dumps(doc['modes'])}"
    m["_"] = "prose"
    return "modes._ (prose)"


def m_slot(doc, rng):
    slots = doc["block"].get("state", [])
    if not slots:
        return None
    i = rng.randrange(len(slots))
    s = slots[i]
    choice = rng.randrange(8)
    if choice == 0 and s.get("kind") == "kv":
        s["kv_from"] = {"per_layer": [None] * n_layers(doc)}
        return f"$.block.state[{i}].kv_from per_layer (any value allowed)"
    if choice == 1 and s.get("kind") == "kv":
        s["evict"] = rng.choice(["turn_state", "lru"])
        return f"$.block.state[{i}].evict = {s['evict']}"
    if choice == 2 and s.get("kind") == "kv":
        s["kv_rows"] = rng.choice(["active", "all"])
        return f"$.block.state[{i}].kv_rows = {s['kv_rows']}"
    if choice == 3 and s.get("kind") == "recurrent":
        t = s["tensors"][0]
        t["init"] = rng.choice([0, "body", 1, "zeros", 0.0, False])
        return f"$.block.state[{i}].tensors[0].init = {json.dumps(t['init'])}"
    if choice == 4 and s.get("kind") == "recurrent":
        s["tensors"][0]["shape"] = rng.choice([[], [0], [3, -1], [2, 2.0], [4, 4]])
        return f"$.block.state[{i}].tensors[0].shape = {json.dumps(s['tensors'][0]['shape'])}"
    if choice == 5 and s.get("kind") == "recurrent":
        s["op"] = rng.choice(["attention", "ssm_scan", "recurrence", "mamba"])
        return f"$.block.state[{i}].op = {s['op']}"
    if choice == 6:
        s["heads"] = rng.choice([4, 0, "4"])
        return f"$.block.state[{i}].heads = {json.dumps(s['heads'])}"
    del s["kind"]
    return f"delete $.block.state[{i}].kind"


def m_node_fields(doc, rng):
    """Nested changes inside a block node: experts, groups, freq_factors, sizes, index, weights..."""
    nodes = doc["block"]["nodes"]
    i = rng.randrange(len(nodes))
    n = nodes[i]
    op = n.get("op")
    p = f"$.block.nodes[{i}]"
    if op == "moe_ffn":
        c = rng.randrange(4)
        if c == 0:
            del n["experts"][rng.choice(["gate", "up", "down"])]
            return f"{p}.experts loses a key"
        if c == 1:
            n["groups"] = rng.choice([{"n": 2, "top": 1}, {"n": 2}, {"n": 0, "top": 1}, {"n": 2, "top": 1, "x": 1}])
            return f"{p}.groups = {json.dumps(n['groups'])}"
        if c == 2:
            n["experts"]["_"] = "prose"
            return f"{p}.experts._"
        n["routing"] = rng.choice(["greedy", 3])
        return f"{p}.routing = {json.dumps(n['routing'])}"
    if op == "rope":
        n["freq_factors"] = copy.deepcopy(rng.choice([
            "rope_freqs.weight", {"short": "a", "long": "b", "original_ctx": 4096}, {"short": "a", "long": "b"},
            [1.0, 2.0], [], ["x"], {"short": "a", "long": "b", "original_ctx": 0}, ""]))
        return f"{p}.freq_factors = {json.dumps(n['freq_factors'])}"
    if op == "split":
        n["sizes"] = rng.choice([[], [8, 0], [8, 8], [8, "8"]])
        return f"{p}.sizes = {json.dumps(n['sizes'])}"
    if op == "recurrence":
        c = rng.randrange(4)
        if c == 0:
            n["index"] = rng.choice([{"c": 0}, {"c": "32"}, {"c": 32, "k": 2}])
            return f"{p}.index = {json.dumps(n['index'])}"
        if c == 1:
            n["weights"] = rng.choice([{"w": ""}, {"w": 1}, {}])
            return f"{p}.weights = {json.dumps(n['weights'])}"
        if c == 2:
            n["update"] = rng.choice([[], ["h = h"], [1]])
            return f"{p}.update = {json.dumps(n['update'])}"
        n["readout"] = rng.choice([["h"], "h", None])
        return f"{p}.readout = {json.dumps(n['readout'])}"
    if op == "attention":
        c = rng.randrange(4)
        if c == 0:
            n["position_bias"] = rng.choice([{"weight": "rel.weight", "buckets": [32, 128]}, {"weight": "w"},
                                             {"weight": "w", "buckets": []}, {"weight": "w", "buckets": [-1]}])
            return f"{p}.position_bias = {json.dumps(n['position_bias'])}"
        if c == 1:
            n["relative_kv"] = rng.choice([{"key": "rk", "value": None, "max_distance": 16}, {"key": "rk", "max_distance": 16},
                                           {"key": "rk"}, {"key": "rk", "value": "", "max_distance": 4}])
            return f"{p}.relative_kv = {json.dumps(n['relative_kv'])}"
        if c == 2:
            n["softmax"] = rng.choice(["alibi", "standard", "anything-goes", 3])
            return f"{p}.softmax = {json.dumps(n['softmax'])}"
        n["mask"] = rng.choice(["turn_state", "causal", "full"])
        return f"{p}.mask = {n['mask']}"
    if op == "linear":
        n["bias"] = rng.choice([None, "b", "", 0])
        return f"{p}.bias = {json.dumps(n['bias'])}"
    n["apply"] = rng.choice([True, False, "yes", {"per_layer": [True] * n_layers(doc)}, 1])
    return f"{p}.apply = {json.dumps(n['apply'])}"


def m_root(doc, rng):
    c = rng.randrange(4)
    if c == 0:
        doc["ir_version"] = rng.choice([2, 0, -1, "1", 1.0])
        return f"ir_version = {json.dumps(doc['ir_version'])}"
    if c == 1:
        doc["model"]["dtype"] = rng.choice(["f32", "bf16"])
        return f"model.dtype = {doc['model']['dtype']}"
    if c == 2:
        doc["family_hint"] = rng.choice(["", None, "mistral"])
        return f"family_hint = {json.dumps(doc['family_hint'])}"
    doc["block"]["weight_index"] = rng.choice([{"per_layer": [0] * n_layers(doc)}, [0, 0], {"per_layer": [0], "x": 1}])
    return f"block.weight_index = {json.dumps(doc['block']['weight_index'])}"


MUTATIONS = [
    (m_delete_key, 6), (m_delete_required, 5), (m_wrong_type, 8), (m_bad_enum, 5), (m_int_bad, 5), (m_int_float, 4),
    (m_unknown_key, 5), (m_prose_key, 6), (m_wrap_per_layer, 6), (m_per_layer_extra, 4), (m_per_layer_bad, 3),
    (m_empty_name, 4), (m_change_number, 5), (m_swap_op, 4), (m_swap_kind, 2), (m_drop_node, 3), (m_dup_node, 3),
    (m_empty_array, 3), (m_tokenizer, 5), (m_io, 5), (m_modes, 3), (m_slot, 6), (m_node_fields, 8), (m_root, 3),
]


def trim(doc, rng):
    """Keeps at most MAX_NODES block nodes (a random contiguous run) so the file stays small."""
    nodes = doc["block"]["nodes"]
    if len(nodes) > MAX_NODES:
        start = rng.randrange(len(nodes) - MAX_NODES + 1)
        doc["block"]["nodes"] = nodes[start:start + MAX_NODES]
    for k in [k for k in doc if k.startswith("_")]:
        del doc[k]


def main():
    global OPS
    schema = json.load(open(os.path.join(ROOT, "spec", "ir.schema.json")))
    OPS = schema["$defs"]["node"]["properties"]["op"]["enum"]
    validator = Draft202012Validator(schema)
    bases = {name: json.load(open(os.path.join(ROOT, "tests", "ir", "docs", name + ".json"))) for name in DOCS}
    rng = random.Random(SEED)
    funcs, weights = zip(*MUTATIONS)
    cases = []
    # The unmutated documents first.
    for name in DOCS:
        cases.append({"id": f"{name}-base", "mutation": "none", "doc": bases[name]})
    while len(cases) < N_CASES:
        name = rng.choice(DOCS)
        doc = copy.deepcopy(bases[name])
        trim(doc, rng)
        count = rng.choices([1, 2, 3], weights=[6, 3, 1])[0]
        done = []
        for _ in range(count):
            f = rng.choices(funcs, weights=weights)[0]
            try:
                d = f(doc, rng)
            except (KeyError, TypeError, IndexError, AttributeError, ValueError):
                d = None  # an earlier mutation removed what this one needed
            if d:
                done.append(d)
        if not done:
            continue
        cases.append({"id": f"{name}-{len(cases):04d}", "mutation": "; ".join(done), "doc": doc})
    # Whole numbers beyond 64 bits are integers to 2020-12 as any others
    # are; valijson needs them brought into range first (schema_check.cpp).
    # Fixed cases after the seeded ones, so those stay as they were.
    for value in (10**19, 2**63, 2**64, 10**20, 10**30, -(10**19)):
        for path in (("model", "ctx"), ("ir_version",), ("tokenizer", "bos")):
            doc = copy.deepcopy(bases["llama"])
            put(doc, path, value)
            cases.append({"id": f"llama-huge-{len(cases):04d}", "mutation": f"{fmt(path)} = {value}", "doc": doc})
    n_valid = 0
    for c in cases:
        c["valid"] = validator.is_valid(c["doc"])
        n_valid += c["valid"]
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        for c in cases:
            f.write(json.dumps(c, separators=(",", ":"), ensure_ascii=False) + "\n")
    print(f"{len(cases)} cases, {n_valid} valid, {len(cases) - n_valid} invalid -> {os.path.relpath(OUT, ROOT)}")


if __name__ == "__main__":
    main()
