"""End-to-end tests of the lofp command against third-party decoders (numpy + ml_dtypes) and the
safetensors package. Run by script_cli.sh as: python cli_e2e.py LOFP_BINARY WORKDIR."""
import json
import os
import signal
import struct
import subprocess
import sys
import time

import ml_dtypes
import numpy as np
from safetensors import safe_open
from safetensors.numpy import save_file

LOFP, WORK = sys.argv[1], sys.argv[2]
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg, flush=True)


def run(*args, ok=True):
    p = subprocess.run([LOFP, *args], capture_output=True, text=True)
    if ok and p.returncode != 0:
        failures.append(f"lofp {' '.join(args)} failed: {p.stderr}")
        print("FAIL:", p.stderr, flush=True)
    return p


def raw_safetensors(path):
    """Our own minimal reader (header JSON + byte ranges), independent of lofp."""
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    meta = h.pop("__metadata__", {})
    return {k: (v["dtype"], v["shape"], b[8 + n + v["data_offsets"][0]: 8 + n + v["data_offsets"][1]]) for k, v in h.items()}, meta


FP4 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0.0, -.5, -1, -1.5, -2, -3, -4, -6], np.float32)
ELEM = {"mxfp4": "fp4", "nvfp4": "fp4", "ultraquant": "fp4", "mxfp6-e2m3": ml_dtypes.float6_e2m3fn,
        "mxfp6-e3m2": ml_dtypes.float6_e3m2fn, "mxfp8-e4m3": ml_dtypes.float8_e4m3fn,
        "mxfp8-e5m2": ml_dtypes.float8_e5m2, "tilelang-mxfp8": ml_dtypes.float8_e4m3fn, "mxint8": "int8"}


def meta_fields(s):
    return dict(kv.split("=", 1) for kv in s.split(";"))


def swizzle_to_linear(buf, rows, cols):
    Rp, Cp = (rows + 127) // 128 * 128, (cols + 3) // 4 * 4
    t = buf.reshape(Rp // 128, Cp // 4, 32, 4, 4)          # (rb, cb, r%32, (r%128)//32, c%4)
    lin = t.transpose(0, 3, 2, 1, 4).reshape(Rp, Cp)       # (rb, r//32, r%32, cb, c%4)
    return lin[:rows, :cols]


def independent_dequant(path, name):
    """Decodes T.codes/T.scales with numpy + ml_dtypes from the raw bytes and the metadata."""
    t, meta = raw_safetensors(path)
    m = meta_fields(meta["lofp:" + name])
    shape = json.loads(m["shape"])
    K, Kp, block = shape[-1], int(m["padded_k"]), int(m["block"])
    rows = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
    cols = Kp // block
    codes = np.frombuffer(t[name + ".codes"][2], np.uint8)
    sbytes = np.frombuffer(t[name + ".scales"][2], np.uint8)
    layout = m["layout"]
    if layout == "linear":
        lin = sbytes.reshape(rows, cols)
    elif layout == "swizzle-128x4":
        lin = swizzle_to_linear(sbytes, rows, cols)
    else:
        ma = rows if layout == "packed-u32" else (rows + 3) // 4 * 4
        G = (cols + 3) // 4
        w = sbytes.reshape(G, ma, 4)[:, :rows, :]           # word (g, m), byte i = group 4g+i
        lin = w.transpose(1, 0, 2).reshape(rows, G * 4)[:, :cols]
    scheme = m["scheme"]
    if scheme == "nvfp4":
        sc = lin.view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    elif scheme == "ultraquant":
        sc = np.where(lin == 0, 0.0, np.ldexp(1.0, lin.astype(np.int32) - 127)).astype(np.float32)
    else:
        sc = lin.view(ml_dtypes.float8_e8m0fnu).astype(np.float32)
    el = ELEM[scheme]
    if el == "fp4":
        v = np.empty(rows * Kp, np.float32)
        v[0::2], v[1::2] = FP4[codes & 15], FP4[codes >> 4]
    elif el == "int8":
        v = codes.view(np.int8).astype(np.float32) * np.float32(1 / 64)
    else:
        v = codes.view(el).astype(np.float32)
    v = v.reshape(rows, cols, block)
    out = (v * sc[:, :, None]).reshape(rows, Kp)
    if scheme == "nvfp4" and m["two_level"] == "1":
        g = np.frombuffer(t[name + ".global_scale"][2], np.float32)[0]
        out = out / g
    return out[:, :K].reshape(shape).astype(np.float32), m, t


rng = np.random.default_rng(7)
os.makedirs(WORK, exist_ok=True)
x = (rng.standard_normal((3, 40, 256)) * np.exp(rng.normal(0, 1, (3, 40, 1)))).astype(np.float32)
x[0, 0, :32] = 0                                   # a zero block
x[1, 2, 5] = 1e-30                                 # tiny values
np.save(f"{WORK}/x.npy", x)
layouts = ["linear", "swizzle-128x4", "packed-u32", "packed-u32:deepgemm"]
presets = ["nvfp4", "mxfp4", "mxfp6-e2m3", "mxfp6-e3m2", "mxfp8-e4m3", "mxfp8-e5m2", "mxint8", "tilelang-mxfp8", "ultraquant"]
for i, scheme in enumerate(presets):
    for lay in layouts if scheme != "ultraquant" else ["linear"]:
        q, back = f"{WORK}/q_{scheme}_{lay.replace(':', '_')}.safetensors", f"{WORK}/b_{scheme}.npy"
        args = ["quantize", "--scheme", scheme, "--scale-layout", lay, f"{WORK}/x.npy", q]
        if scheme == "mxfp4":
            args[3:3] = ["--scale-rule", "rceil"]
        run(*args)
        run("dequantize", q, back)
        got = np.load(back)
        want, m, t = independent_dequant(q, "x")
        check(got.shape == x.shape and got.dtype == np.float32, f"{scheme}/{lay}: shape {got.shape} dtype {got.dtype}")
        check(np.array_equal(got.view(np.uint32), want.view(np.uint32)),
              f"{scheme}/{lay}: lofp dequantize != numpy/ml_dtypes decode of the file ({np.sum(got != want)} differ)")
        names = sorted(t)
        expect = ["x.codes", "x.scales"] + (["x.global_scale"] if scheme == "nvfp4" else [])
        check(names == sorted(expect), f"{scheme}: tensor names {names}")
        cd = {"mxfp8-e4m3": "F8_E4M3", "tilelang-mxfp8": "F8_E4M3", "mxfp8-e5m2": "F8_E5M2"}.get(scheme, "U8")
        check(t["x.codes"][0] == cd, f"{scheme}: codes dtype {t['x.codes'][0]}")
        sd = "U32" if lay.startswith("packed") else {"nvfp4": "F8_E4M3", "ultraquant": "U8"}.get(scheme, "F8_E8M0")
        check(t["x.scales"][0] == sd, f"{scheme}/{lay}: scales dtype {t['x.scales'][0]}")
        if scheme == "nvfp4":
            check(t["x.global_scale"][0] == "F32" and t["x.global_scale"][1] == [], "global_scale is an F32 scalar")
        # the safetensors package parses the file: names, metadata, and every non-F8 tensor's bytes
        with safe_open(q, framework="numpy") as f:
            check(sorted(f.keys()) == names, f"{scheme}: safetensors keys {sorted(f.keys())}")
            check("lofp:x" in f.metadata(), f"{scheme}: metadata {f.metadata()}")
            for k in f.keys():
                if not t[k][0].startswith("F8"):
                    check(f.get_tensor(k).tobytes() == t[k][2], f"{scheme}: safetensors bytes of {k}")
        if lay == "linear" and scheme in ("nvfp4", "mxfp8-e4m3"):
            # inspect runs and reports an SNR against the original
            p = run("inspect", q, "--against", f"{WORK}/x.npy")
            check("SNR" in p.stdout and "bits/value" in p.stdout, f"inspect output: {p.stdout}")
            # ... whose numbers are numpy's, over the numpy/ml_dtypes decode of the file
            import re
            mm = re.search(r"max\|err\| (\S+)  RMSE (\S+)  SNR (\S+) dB  rel.Frobenius (\S+)", p.stdout)
            xd, yd = x.astype(np.float64).ravel(), want.astype(np.float64).ravel()
            e = yd - xd
            ref = [np.max(np.abs(e)), np.sqrt(np.mean(e * e)), 10 * np.log10(np.sum(xd * xd) / np.sum(e * e)),
                   np.sqrt(np.sum(e * e) / np.sum(xd * xd))]
            got_s = [float(v) for v in mm.groups()] if mm else [np.nan] * 4
            # printed with %.6g (SNR with %.2f)
            check(np.allclose(got_s[:2] + got_s[3:], ref[:2] + ref[3:], rtol=1e-5, atol=0) and abs(got_s[2] - ref[2]) <= 0.006,
                  f"{scheme}: inspect statistics {mm and mm.groups()} != numpy {ref}")
            # the scale-exponent histogram from the stored scale bytes
            sb = np.frombuffer(t["x.scales"][2], np.uint8)
            if scheme == "nvfp4":
                sv = sb.view(ml_dtypes.float8_e4m3fn).astype(np.float64)
                ok = (sv > 0) & np.isfinite(sv)
                ex = np.floor(np.log2(sv[ok])).astype(int)
            else:
                ok = sb != 0xFF
                ex = sb[ok].astype(int) - 127
            hist = " ".join(f"{v}:{c}" for v, c in zip(*np.unique(ex, return_counts=True)))
            zero = int(np.sum(~ok))
            want_line = f"scale exponents (log2 scale: count): {hist}" + (f" zero/NaN:{zero}" if zero else "")
            check(want_line in p.stdout, f"{scheme}: inspect histogram, want '{want_line}' in {p.stdout}")

# bf16 input written by the safetensors package, padding, multi-tensor selection, --dtype bf16
xb = rng.standard_normal((5, 40)).astype(ml_dtypes.bfloat16)
save_file({"w": xb.view(np.uint16).view(np.uint8).reshape(5, 80), "keep": np.arange(6, dtype=np.int8)}, f"{WORK}/raw.safetensors")
# rewrite the header dtype of w to BF16 [5, 40] (safetensors.numpy cannot hold bf16 itself)
b = open(f"{WORK}/raw.safetensors", "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h["w"]["dtype"], h["w"]["shape"] = "BF16", [5, 40]
hj = json.dumps(h, separators=(",", ":")).encode()
hj += b" " * (-len(hj) % 8)
open(f"{WORK}/in_bf16.safetensors", "wb").write(struct.pack("<Q", len(hj)) + hj + b[8 + n:])
p = run("quantize", "--scheme", "mxfp4", f"{WORK}/in_bf16.safetensors", f"{WORK}/nopad.safetensors", ok=False)
check(p.returncode != 0 and "'w'" in p.stderr and "--pad" in p.stderr, f"K=40 without --pad must fail naming the tensor: {p.stderr}")
check(not os.path.exists(f"{WORK}/nopad.safetensors"), "a failed quantize left an output file")
run("quantize", "--scheme", "mxfp4", "--pad", f"{WORK}/in_bf16.safetensors", f"{WORK}/pad.safetensors")
t, meta = raw_safetensors(f"{WORK}/pad.safetensors")
check(sorted(t) == ["keep", "w.codes", "w.scales"], f"pass-through of non-float tensors: {sorted(t)}")
check(t["keep"][2] == np.arange(6, dtype=np.int8).tobytes(), "int8 tensor copied unchanged")
check(t["w.codes"][1] == [5, 32], f"padded codes shape {t['w.codes'][1]}")
run("dequantize", "--dtype", "bf16", f"{WORK}/pad.safetensors", f"{WORK}/pad_back.safetensors")
t2, _ = raw_safetensors(f"{WORK}/pad_back.safetensors")
check(t2["w"][0] == "BF16" and t2["w"][1] == [5, 40], f"dequantized bf16 shape {t2['w'][:2]}")
want, _, _ = independent_dequant(f"{WORK}/pad.safetensors", "w")
got = np.frombuffer(t2["w"][2], ml_dtypes.bfloat16).astype(np.float32).reshape(5, 40)
check(np.array_equal(got, want.astype(ml_dtypes.bfloat16).astype(np.float32)), "bf16 output = RNE of the fp32 dequant")
run("quantize", "--scheme", "nvfp4", "--exclude", "w*", f"{WORK}/in_bf16.safetensors", f"{WORK}/excl.safetensors", ok=False)

# errors: NaN names tensor and index; missing input; bad scheme
xn = x.copy()
xn[1, 3, 17] = np.nan
np.save(f"{WORK}/nan.npy", xn)
p = run("quantize", "--scheme", "mxfp8-e4m3", f"{WORK}/nan.npy", f"{WORK}/nan.safetensors", ok=False)
idx = (1 * 40 + 3) * 256 + 17
check(p.returncode != 0 and str(idx) in p.stderr and "'nan'" in p.stderr, f"NaN error must name tensor and index {idx}: {p.stderr}")
p = run("quantize", "--scheme", "mxfp8-e4m3", "--propagate-nonfinite", f"{WORK}/nan.npy", f"{WORK}/nanp.safetensors")
want, _, _ = independent_dequant(f"{WORK}/nanp.safetensors", "nan")
check(np.isnan(want[1, 3, :32]).all() and not np.isnan(want[1, 3, 32:]).any(), "propagated block is NaN, others are not")
p = run("quantize", "--scheme", "nvfp4", f"{WORK}/missing.npy", f"{WORK}/m.safetensors", ok=False)
check(p.returncode != 0 and "missing.npy" in p.stderr, f"missing input named: {p.stderr}")
p = run("quantize", "--scheme", "nvfp5", f"{WORK}/x.npy", f"{WORK}/m.safetensors", ok=False)
check(p.returncode != 0 and "nvfp5" in p.stderr, "unknown scheme named")
for cmd in ["quantize", "dequantize", "inspect", "layout", "verify", "demo", "bench"]:
    p = run(cmd, "--help")
    check(p.returncode == 0 and "usage" in p.stdout, f"{cmd} --help")
p = run("--version")
check(p.stdout.startswith("lofp "), "--version")

# layout convert + diagnose round trip
run("quantize", "--scheme", "mxfp8-e4m3", "--block", "32", f"{WORK}/x.npy", f"{WORK}/lin.safetensors")
run("layout", "convert", "--to", "packed-u32", f"{WORK}/lin.safetensors", f"{WORK}/pk.safetensors")
a, _, _ = independent_dequant(f"{WORK}/lin.safetensors", "x")
bq, m, t = independent_dequant(f"{WORK}/pk.safetensors", "x")
check(m["layout"] == "packed-u32" and np.array_equal(a, bq), "layout convert keeps the values")
words = np.frombuffer(t["x.scales"][2], np.uint32)
np.save(f"{WORK}/words.npy", words)
np.save(f"{WORK}/x2d.npy", x.reshape(-1, 256))
p = run("layout", "diagnose", f"{WORK}/words.npy", "--tensor", f"{WORK}/x2d.npy", "--scheme", "mxfp8-e4m3", "--block", "32")
check("packed-u32" in p.stdout and "verdict" in p.stdout, f"diagnose names packed-u32: {p.stdout}")
np.save(f"{WORK}/words_rev.npy", words.byteswap())
p = run("layout", "diagnose", f"{WORK}/words_rev.npy", "--tensor", f"{WORK}/x2d.npy", "--scheme", "mxfp8-e4m3", "--block", "32", ok=False)
check("reversed" in p.stdout, f"diagnose sees reversed bytes: {p.stdout}")

# verify: a correct GEMM passes; swizzled scales read as linear are named
rng2 = np.random.default_rng(3)
np.save(f"{WORK}/A.npy", rng2.standard_normal((64, 256)).astype(np.float32))
np.save(f"{WORK}/B.npy", (rng2.standard_normal((96, 256)) * 0.05).astype(np.float32))
run("quantize", "--scheme", "nvfp4", "--scale-layout", "swizzle-128x4", f"{WORK}/A.npy", f"{WORK}/A.q.safetensors")
run("quantize", "--scheme", "nvfp4", "--scale-layout", "swizzle-128x4", f"{WORK}/B.npy", f"{WORK}/B.q.safetensors")
Ad, _, tA = independent_dequant(f"{WORK}/A.q.safetensors", "A")
Bd, _, _ = independent_dequant(f"{WORK}/B.q.safetensors", "B")
np.save(f"{WORK}/C_good.npy", (Ad.astype(np.float64) @ Bd.astype(np.float64).T).astype(np.float32))
p = run("verify", f"{WORK}/A.q.safetensors", f"{WORK}/B.q.safetensors", f"{WORK}/C_good.npy")
check(p.returncode == 0 and "OK" in p.stdout, f"verify accepts a correct GEMM: {p.stdout}")
sw = np.frombuffer(tA["A.scales"][2], np.uint8)
lin_bad = sw[:64 * 16].reshape(64, 16).view(ml_dtypes.float8_e4m3fn).astype(np.float32)
codes = np.frombuffer(tA["A.codes"][2], np.uint8).reshape(64, 128)
e = np.empty((64, 256), np.float32)
e[:, 0::2], e[:, 1::2] = FP4[codes & 15], FP4[codes >> 4]
g = np.frombuffer(tA["A.global_scale"][2], np.float32)[0]
Abad = (e.reshape(64, 16, 16) * lin_bad[:, :, None]).reshape(64, 256) / g
np.save(f"{WORK}/C_bad.npy", (Abad.astype(np.float64) @ Bd.astype(np.float64).T).astype(np.float32))
p = run("verify", f"{WORK}/A.q.safetensors", f"{WORK}/B.q.safetensors", f"{WORK}/C_bad.npy", ok=False)
check(p.returncode == 1 and "explained: A scales (written swizzle-128x4) read as linear" in p.stdout, f"verify names the mistake: {p.stdout[-400:]}")

# lofp vectors: the suite's files, with the manifest's counts and SHA-256 (hashlib), an E2M1 tie
# derived by hand (1.25 between 1.0 = 0x2 and 1.5 = 0x3), usage errors
import hashlib
vdir = f"{WORK}/vectors/sub"
p = run("vectors", vdir)
man = json.load(open(f"{vdir}/manifest.json"))
for e in man["files"]:
    data = open(f"{vdir}/{e['name']}", "rb").read()
    check(hashlib.sha256(data).hexdigest() == e["sha256"], f"vectors: {e['name']} SHA-256")
    check(data.count(b"\n") == e["cases"] and f"{e['cases']} cases" in p.stdout, f"vectors: {e['name']} count")
tie = [json.loads(l) for l in open(f"{vdir}/element.jsonl") if '"id":"e2m1/saturate/3fa00000"' in l]
check(len(tie) == 1 and tie[0]["codes"] == {"rne": "0x02", "ties-to-zero": "0x02", "ties-away": "0x03"}, f"vectors: E2M1 1.25 {tie}")
check(run("vectors", ok=False).returncode == 2, "vectors without DIR exits 2")
check(run("vectors", "--bogus", vdir, ok=False).returncode == 1, "vectors refuses unknown options")
check("usage: lofp vectors" in run("vectors", "--help").stdout, "vectors --help")

# killing quantize midway leaves the destination absent or the previous complete file
big = rng.standard_normal((4096, 4096)).astype(np.float32)
np.save(f"{WORK}/big.npy", big)
dest = f"{WORK}/big.q.safetensors"
run("quantize", "--scheme", "mxfp4", f"{WORK}/x.npy", dest)
before = open(dest, "rb").read()
for delay in (0.05, 0.2, 0.5):
    proc = subprocess.Popen([LOFP, "quantize", "--scheme", "nvfp4", f"{WORK}/big.npy", dest])
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    now = open(dest, "rb").read()
    check(now == before or (len(now) > len(before) and raw_safetensors(dest)[0]), f"after kill at {delay}s the file is neither old nor complete")
    before = now
leftovers = [f for f in os.listdir(WORK) if f.startswith(".") and "big.q" in f]
print("temporary files left by killed runs (expected: may exist, never the destination):", leftovers)

print(f"cli_e2e: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
