#!/usr/bin/python3
"""Re-runs ONNX Runtime on committed QMoE case directories and checks that the
expected files are reproduced (not part of CI: needs scripts/qmoe/setup_ort.sh).

    /usr/bin/python3 scripts/qmoe/check_cases.py [DIR ...]   # default goldens/qmoe/cases/*

For every case: rebuilds the one-node model from case.json (and checks it is
byte-identical to the committed model.onnx), runs it with one intra-op thread
and requires expected_output.bin to be reproduced bit for bit; runs it again
with 2 threads and with the weights as constant initializers and requires the
tolerance of docs/QMOE.md; and requires the float64 rule model
(qmoe_common.reference) within the tolerance. For a refusal case, checks that
ORT still does what INDEX.json says it does with that value (accepts or refuses).
Prints one line per case and exits 1 on any mismatch.
"""

import json
import os
import shutil
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qmoe_common as qc  # noqa: E402
from gen_cases import ATOL, COMMITTED, RTOL  # noqa: E402


def within(y, ref):
    y = np.asarray(y, np.float64)
    ref = np.asarray(ref, np.float64)
    d = np.abs(y - ref)
    return bool((d <= ATOL + RTOL * np.abs(ref)).all()), float(d.max(initial=0.0))


def main():
    dirs = sys.argv[1:] or sorted(os.path.join(COMMITTED, n) for n in os.listdir(COMMITTED)
                                  if os.path.isdir(os.path.join(COMMITTED, n)))
    index = {}
    idx_path = os.path.join(os.path.dirname(os.path.abspath(dirs[0])), "INDEX.json")
    if os.path.exists(idx_path):
        index = {e["name"]: e for e in json.load(open(idx_path))["cases"]}
    tmp = tempfile.mkdtemp(prefix="qmoe_check_")
    jobs1, jobs2, jobs_c = [], [], []
    for d in dirs:
        case = json.load(open(os.path.join(d, "case.json")))
        name = os.path.basename(os.path.normpath(d))
        model = os.path.join(tmp, name + ".onnx")
        with open(model, "wb") as f:
            f.write(qc.build_model(case))
        const = os.path.join(d, ".check_const.onnx")  # external data paths are relative to the model
        with open(const, "wb") as f:
            f.write(qc.build_model(case, const_dir=d))
        jobs1.append({"case": d, "model": model, "out": os.path.join(tmp, name + ".1.bin")})
        jobs2.append({"case": d, "model": model, "out": os.path.join(tmp, name + ".2.bin")})
        jobs_c.append({"case": d, "model": const, "out": os.path.join(tmp, name + ".c.bin")})
    r1 = qc.run_ort(jobs1, threads=1)
    r2 = qc.run_ort(jobs2, threads=2)
    rc = qc.run_ort(jobs_c, threads=1)
    bad = 0
    for d, j1, a1, a2, ac in zip(dirs, jobs1, r1, r2, rc):
        os.remove(os.path.join(d, ".check_const.onnx"))
        name = os.path.basename(os.path.normpath(d))
        case, arrays, expected = qc.read_case(d)
        problems = []
        committed_model = os.path.join(d, "model.onnx")
        if os.path.exists(committed_model) and open(committed_model, "rb").read() != open(j1["model"], "rb").read():
            problems.append("model.onnx differs from the one case.json builds")
        if "error" in case["expected"]:
            ort_says = index.get(name, {}).get("ort", "")
            if ort_says.startswith("accepts") and not a1["ok"]:
                problems.append("ORT now refuses: " + a1["error"][:100])
            if ort_says.startswith("refuses") and a1["ok"]:
                problems.append("ORT now accepts")
            status = f"refusal ({case['expected']['error']})"
        else:
            if not a1["ok"]:
                problems.append("ORT failed: " + a1["error"][:200])
            else:
                y1 = np.fromfile(j1["out"], "<f4").reshape(expected.shape)
                if not np.array_equal(y1.view(np.uint32), expected.view(np.uint32)):
                    problems.append(f"1 thread: not bit-identical (max diff {np.abs(y1 - expected).max():.3g})")
                for label, r, job in [("2 threads", a2, jobs2), ("const weights", ac, jobs_c)]:
                    if not r["ok"]:
                        problems.append(f"{label}: ORT failed")
                        continue
                    y = np.fromfile(r["out"], "<f4").reshape(expected.shape)
                    ok, dmax = within(y, expected)
                    if not ok:
                        problems.append(f"{label}: max diff {dmax:.3g} beyond tolerance")
                ok, dmax = within(expected, qc.reference(arrays, case["attributes"]))
                if not ok:
                    problems.append(f"rule model: max diff {dmax:.3g} beyond tolerance")
            status = "output"
        bad += bool(problems)
        print(f"{'FAIL' if problems else 'ok  '} {name}: {status}" + ("" if not problems else " - " + "; ".join(problems)))
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"check_cases: {len(dirs) - bad} passed, {bad} failed")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
