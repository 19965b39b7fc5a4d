"""The conformance suite end to end (docs/CONFORMANCE.md, docs/TESTING.md "script_vectors"):

1. `lofp vectors` twice: byte-identical files, the same ids, the counts it prints are the
   manifest's.
2. The runner: `verify` passes; `check --impl lofp` and `--impl ml_dtypes` and `--impl gguf` have
   no unexplained failure, ml_dtypes and gguf pass a nonzero number of cases, and every quirk id
   the runner reports is listed in docs/CONFORMANCE.md.
3. A vector changed by hand: `verify` and `check` fail; with the manifest's checksum updated to
   hide the edit, `check` still fails on exactly that case, for lofp and for ml_dtypes.
4. Expected bits that lofp did not compute: pinned element ids against values derived by hand
   from the formats' definitions and against ml_dtypes' casts; every MX FLOOR block line of the
   lofp profile against an OCP MX oracle written here with numpy and ml_dtypes; every layout line
   against the swizzle and packed-word layouts rebuilt here with numpy reshapes.

    python vectors_check.py <build_dir> <source_dir>
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import ml_dtypes
import numpy as np

build, src = sys.argv[1], sys.argv[2]
LOFP = os.path.join(build, "lofp")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(*args, env=None):
    return subprocess.run(args, capture_output=True, text=True, env=env)


def runner(*args):
    return run(sys.executable, "-m", "lofp.vectors", *args)


def lines(d, fam):
    with open(os.path.join(d, f"{fam}.jsonl")) as f:
        return [json.loads(x) for x in f]


tmp = tempfile.mkdtemp(prefix="lofp_vectors_")
try:
    a, b = os.path.join(tmp, "a"), os.path.join(tmp, "b")
    # 1. Generation is deterministic; the CLI prints the manifest's counts.
    ra = run(LOFP, "vectors", a)
    rb = run(LOFP, "vectors", b)
    check(ra.returncode == 0 and rb.returncode == 0, f"lofp vectors failed: {ra.stderr}{rb.stderr}")
    with open(os.path.join(a, "manifest.json")) as f:
        manifest = json.load(f)
    for e in manifest["files"]:
        with open(os.path.join(a, e["name"]), "rb") as f1, open(os.path.join(b, e["name"]), "rb") as f2:
            check(f1.read() == f2.read(), f"{e['name']} differs between two runs")
        fam = e["name"].split(".")[0]
        check(re.search(rf"{re.escape(e['name'])}\s+{e['cases']} cases", ra.stdout) is not None,
              f"lofp vectors did not print {e['cases']} cases for {e['name']}: {ra.stdout}")
        ids_a = [c["id"] for c in lines(a, fam)]
        check(len(ids_a) == len(set(ids_a)), f"{fam}: duplicate ids")
    check(manifest["suite_version"] == 1, "suite_version")
    check(run(LOFP, "vectors").returncode != 0, "lofp vectors without DIR must fail")

    # 2. The runner against the implementations in the test venv.
    with open(os.path.join(src, "docs", "CONFORMANCE.md")) as f:
        documented = set(re.findall(r"\bQ-[A-Z0-9-]+[A-Z0-9]\b", f.read()))
    r = runner("verify", a)
    check(r.returncode == 0, f"verify failed on a fresh suite: {r.stdout}{r.stderr}")
    results = {}
    for impl in ("lofp", "ml_dtypes", "gguf"):
        out = os.path.join(tmp, f"{impl}.json")
        r = runner("check", a, "--impl", impl, "--json", out)
        print(r.stdout, end="")
        check(r.returncode == 0, f"check --impl {impl}: exit {r.returncode}: {r.stdout[-2000:]}{r.stderr}")
        with open(out) as f:
            results[impl] = res = json.load(f)
        check(res["installed"], f"{impl} is not installed in the test venv")
        check(res["unexplained"] == 0, f"{impl}: {res['unexplained']} unexplained failures")
        check(res["passed"] > 0, f"{impl}: no case passed")
        for fam in res["families"].values():
            for q in fam["quirks"]:
                check(q in documented, f"{impl}: quirk {q} is not listed in docs/CONFORMANCE.md")
    lo = results["lofp"]
    check(lo["quirk"] == 0 and lo["not_applicable"] == 0, "lofp must run every case with no quirk")
    check(results["ml_dtypes"]["passed"] > 3000, "ml_dtypes ran too few element cases")
    check(results["gguf"]["families"]["block"]["passed"] >= 40, "gguf ran too few MXFP4 cases")
    # The producers' adapters import lazily: absent (the test venv), they report it and pass;
    # present (a venv given by LOFP_PYTHON), they must run without an unexplained case.
    for impl in ("torchao", "compressed-tensors"):
        r = runner("check", a, "--impl", impl)
        check(r.returncode == 0 and ("not installed" in r.stdout or "unexplained 0, not" in r.stdout),
              f"{impl}: {r.stdout}{r.stderr}")

    # 3. A vector changed by hand.
    t = os.path.join(tmp, "tampered")
    shutil.copytree(a, t)
    path = os.path.join(t, "element.jsonl")
    with open(path) as f:
        text = f.read().splitlines(keepends=True)
    target = "e4m3/ieee/3fc00000"  # 1.5, exactly representable: 0x3c
    idx = next(i for i, ln in enumerate(text) if f'"id":"{target}"' in ln)
    check('"rne":"0x3c"' in text[idx], f"{target}: expected rne 0x3c in {text[idx]}")
    text[idx] = text[idx].replace('"rne":"0x3c"', '"rne":"0x3d"')
    with open(path, "w") as f:
        f.writelines(text)
    check(runner("verify", t).returncode == 1, "verify passed a hand-edited vector")
    check(runner("check", t, "--impl", "lofp").returncode == 1, "check passed a hand-edited vector")
    import hashlib
    man_path = os.path.join(t, "manifest.json")
    with open(man_path) as f:
        m = json.load(f)
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    for e in m["files"]:
        if e["name"] == "element.jsonl":
            e["sha256"] = digest
    with open(man_path, "w") as f:
        json.dump(m, f)
    check(runner("verify", t).returncode == 0, "verify after re-signing the manifest")
    for impl in ("lofp", "ml_dtypes"):
        r = runner("check", t, "--impl", impl)
        check(r.returncode == 1 and "unexplained 1," in r.stdout and target in r.stdout,
              f"{impl}: the edited case {target} was not reported: {r.stdout}")

    # 4a. Pinned element ids, derived by hand from FORMATS.md's definitions.
    el = {c["id"]: c for c in lines(a, "element")}
    pinned = [
        # E2M1 ties (FORMATS.md table): 1.25 is between 1 (0x2) and 1.5 (0x3); 2.5 between 2 (0x4) and 3 (0x5).
        ("e2m1/saturate/3fa00000", {"rne": 0x2, "ties-to-zero": 0x2, "ties-away": 0x3}),
        ("e2m1/saturate/40200000", {"rne": 0x4, "ties-to-zero": 0x4, "ties-away": 0x5}),
        ("e2m1/saturate/be800000", {"rne": 0x8, "ties-to-zero": 0x8, "ties-away": 0x9}),  # -0.25: -0 or -0.5
        ("e2m1/ieee/40e00000", {"rne": 0x7, "ties-to-zero": 0x7, "ties-away": 0x7}),      # 7: FP4 saturates
        # E4M3: 464 is the midpoint of 448 (0x7e) and the missing 480; one ulp above is NaN under ieee.
        ("e4m3/ieee/43e80000", {"rne": 0x7e, "ties-to-zero": 0x7e}),
        ("e4m3/ieee/43e80001", {"rne": 0x7f, "ties-to-zero": 0x7f, "ties-away": 0x7f}),
        ("e4m3/saturate/43e80001", {"rne": 0x7e}),
        ("e4m3/saturate/3a800000", {"rne": 0x00, "ties-to-zero": 0x00, "ties-away": 0x01}),  # 2^-10: half of the min subnormal 2^-9
        # E5M2: 61440 is the midpoint of 57344 (0x7b) and 65536; rne goes to the even code 0x7c = Inf.
        ("e5m2/ieee/47700000", {"rne": 0x7c, "ties-to-zero": 0x7b}),
        ("e5m2/saturate/47700000", {"rne": 0x7b}),
        # E8M0: 1.0 is 0x7f; 3 = 1.5*2 ties between 2 (0x80) and 4 (0x81): even exponent 0x80.
        ("e8m0/saturate/3f800000", {"rne": 0x7f}),
        ("e8m0/saturate/40400000", {"rne": 0x80, "ties-away": 0x81}),
        ("e8m0/saturate/00000000", {"rne": 0x00}),
        ("e8m0/ieee/00000000", {"rne": 0xff}),
        # MXINT8: 2^-7 is half of one step (2^-6): rne and ties-to-zero give 0, ties-away 1; 2 clamps to 127.
        ("mxint8/saturate/3c000000", {"rne": 0x00, "ties-to-zero": 0x00, "ties-away": 0x01}),
        ("mxint8/ieee/bfc00000", {"rne": 0xa0}),  # -1.5 * 64 = -96 = 0xa0
        ("ue4m3/saturate/bf800000", {"rne": 0x00}),  # negative -> 0
    ]
    for cid, want in pinned:
        c = el.get(cid)
        check(c is not None, f"pinned id {cid} is missing from the suite")
        if c is None:
            continue
        for mode, code in want.items():
            check(int(c["codes"][mode], 16) == code, f"{cid} [{mode}]: suite {c['codes'][mode]}, by hand 0x{code:02x}")
    # The same pinned float ids through ml_dtypes (rne, ieee cases only: ml_dtypes' policy).
    mtypes = {"e2m1": ml_dtypes.float4_e2m1fn, "e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}
    for cid, want in pinned:
        elem, pol, xb = cid.split("/")
        if elem in mtypes and pol == "ieee":
            got = int(np.array([int(xb, 16)], np.uint32).view(np.float32).astype(mtypes[elem]).view(np.uint8)[0])
            check(got == int(el[cid]["codes"]["rne"], 16), f"{cid}: ml_dtypes 0x{got:02x}, suite {el[cid]['codes']['rne']}")

    # 4b. MX FLOOR block lines of the lofp profile against an OCP MX oracle (numpy + ml_dtypes):
    # scale exponent floor(log2 amax) - emax_elem (from frexp, exact), clamped to E8M0's range;
    # elements x / 2^e exactly, saturated to +-max, cast with ml_dtypes (RNE); all-zero block:
    # scale 0x00 and zero codes.
    elem_of = {"mxfp4": (ml_dtypes.float4_e2m1fn, 2, 6.0), "mxfp6-e2m3": (ml_dtypes.float6_e2m3fn, 2, 7.5),
               "mxfp6-e3m2": (ml_dtypes.float6_e3m2fn, 4, 28.0), "mxfp8-e4m3": (ml_dtypes.float8_e4m3fn, 8, 448.0),
               "mxfp8-e5m2": (ml_dtypes.float8_e5m2, 15, 57344.0)}
    checked = 0
    for c in lines(a, "block"):
        if c["scheme"] not in elem_of or c["scale_rule"] != "floor":
            continue
        exp = c["expected"]["lofp"]
        x = np.frombuffer(bytes.fromhex(c["x"]), ">u4").astype(np.uint32).view(np.float32)
        if exp["status"] != "ok" or not np.all(np.isfinite(x)):
            continue
        T, emax, vmax = elem_of[c["scheme"]]
        rows, k = c["rows"], c["k"]
        kp = -(-k // 32) * 32
        xp = np.zeros((rows, kp), np.float64)
        xp[:, :k] = x.reshape(rows, k)
        blocks = xp.reshape(rows * kp // 32, 32)
        scales, codes = [], []
        for blk in blocks:
            amax = np.max(np.abs(blk))
            if amax == 0:
                e = -127
            else:
                e = int(np.frexp(amax)[1]) - 1 - emax
                e = max(-127, min(127, e))
            scales.append(e + 127)
            q = np.clip(blk / np.ldexp(1.0, e), -vmax, vmax)
            q = np.where(blk == 0, blk, q)  # keep the sign of zero
            codes.append(q.astype(T).view(np.uint8))
        codes = np.concatenate(codes).astype(np.uint8)
        if c["scheme"] == "mxfp4":
            codes = (codes[0::2] & 0xF) | ((codes[1::2] & 0xF) << 4)
        got_codes, got_scales = codes.astype(np.uint8).tobytes().hex(), bytes(scales).hex()
        check(got_codes == exp["codes"] and got_scales == exp["scales"],
              f"{c['id']}: MX oracle codes {got_codes} scales {got_scales}, suite {exp['codes']} {exp['scales']}")
        checked += 1
    check(checked >= 200, f"only {checked} MX FLOOR lines checked against the oracle")
    print(f"MX oracle: {checked} block lines")

    # 4c. Layouts rebuilt with numpy: swizzle-128x4 as 128x4 tiles, each stored as 32 rows of
    # 16 bytes (row r%32, then the four 32-row bands, then the 4 columns); packed-u32 as 4-byte
    # words over K groups, group-major, pad 127 (TileLang, Ma = rows) or 0 (DeepGEMM, Ma =
    # rows rounded up to 4).
    nl = 0
    for c in lines(a, "layout"):
        rows, cols = c["rows"], c["cols"]
        lin = np.frombuffer(bytes.fromhex(c["linear"]), np.uint8).reshape(rows, cols)
        if c["layout"] == "swizzle-128x4":
            rp, cp = -(-rows // 128) * 128, -(-cols // 4) * 4
            p = np.zeros((rp, cp), np.uint8)
            p[:rows, :cols] = lin
            tiles = p.reshape(rp // 128, 128, cp // 4, 4).transpose(0, 2, 1, 3)      # [rt, ct, 128, 4]
            tiles = tiles.reshape(rp // 128, cp // 4, 4, 32, 4).transpose(0, 1, 3, 2, 4)  # [rt, ct, 32, band, 4]
            want = tiles.reshape(-1)
        else:
            dg = c["layout"] == "packed-u32:deepgemm"
            ma = -(-rows // 4) * 4 if dg else rows
            g = -(-cols // 4)
            p = np.full((ma, 4 * g), 0 if dg else 127, np.uint8)
            p[:rows, :cols] = lin
            want = p.reshape(ma, g, 4).transpose(1, 0, 2).reshape(-1)
        check(want.tobytes().hex() == c["buffer"], f"{c['id']}: numpy layout differs from the suite")
        nl += 1
    check(nl >= 100, "too few layout lines")
finally:
    shutil.rmtree(tmp, ignore_errors=True)

print(f"vectors_check: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
