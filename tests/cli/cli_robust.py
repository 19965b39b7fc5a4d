"""Robustness tests of the lofp command: the streaming pipeline's exact bytes and
bounded memory, and each data-loss bug and weak spot (many tensors, long names and paths, output =
input, UltraQuant overflow, strict numbers in options and metadata, dtype checks, block bound,
F64 range, notes for tensors that cannot be quantized, signals, file modes, attention's output).
Run by script_cli_robust.sh as: python cli_robust.py LOFP_BINARY WORKDIR."""
import json
import os
import signal
import struct
import subprocess
import sys
import time

import numpy as np
from safetensors.numpy import save_file

LOFP, WORK = sys.argv[1], sys.argv[2]
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg, flush=True)


def run(*args, ok=True, env=None):
    p = subprocess.run([LOFP, *args], capture_output=True, text=True, env=env)
    if ok and p.returncode != 0:
        failures.append(f"lofp {' '.join(a[:80] for a in args)} failed: {p.stderr}")
        print("FAIL:", p.stderr, flush=True)
    return p


def fails(args, *needles, what=""):
    p = run(*args, ok=False)
    good = p.returncode not in (0, None) and p.returncode > 0 and all(n in p.stderr for n in needles)
    check(good, f"{what or ' '.join(args[:3])}: expected a failure naming {needles}, got rc={p.returncode} {p.stderr!r}")
    return p


def read_st(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    meta = h.pop("__metadata__", {})
    return {k: (v["dtype"], v["shape"], b[8 + n + v["data_offsets"][0]: 8 + n + v["data_offsets"][1]]) for k, v in h.items()}, meta


def write_st(path, tensors, meta=None):
    """A safetensors file written by hand: tensors = {name: (dtype, shape, bytes)} in this order."""
    h, off, data = {}, 0, b""
    if meta:
        h["__metadata__"] = meta
    for k, (dt, shape, raw) in tensors.items():
        h[k] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        data += raw
    hj = json.dumps(h, separators=(",", ":")).encode()
    hj += b" " * (-len(hj) % 8)
    open(path, "wb").write(struct.pack("<Q", len(hj)) + hj + data)


def leftovers(d):
    return [f for f in os.listdir(d) if ".tmp-" in f]


rng = np.random.default_rng(11)
W = WORK

# ---- streaming: bytes equal whatever the chunk size, every tensor dtype and scheme ------------
x = (rng.standard_normal((600, 1024)) * np.exp(rng.normal(0, 1, (600, 1)))).astype(np.float32)
save_file({"a": x, "b": x[:300].astype(np.float16), "c": np.arange(10, dtype=np.int32)}, f"{W}/multi.safetensors")
for scheme in ["nvfp4", "mxfp4", "mxfp8-e4m3", "ultraquant"]:
    for extra in ([], ["--rounding", "stochastic", "--seed", "99"]):
        if scheme == "ultraquant" and extra:
            continue
        run("quantize", "--scheme", scheme, *extra, "--chunk-mib", "4096", f"{W}/multi.safetensors", f"{W}/one.safetensors")
        run("quantize", "--scheme", scheme, *extra, "--chunk-mib", "1", "--threads", "2", f"{W}/multi.safetensors", f"{W}/many.safetensors")
        check(open(f"{W}/one.safetensors", "rb").read() == open(f"{W}/many.safetensors", "rb").read(),
              f"{scheme} {extra}: 1 MiB chunks (3 per tensor) give other bytes than one chunk")
        run("dequantize", "--chunk-mib", "4096", f"{W}/one.safetensors", f"{W}/d1.safetensors")
        run("dequantize", "--chunk-mib", "1", f"{W}/one.safetensors", f"{W}/d2.safetensors")
        check(open(f"{W}/d1.safetensors", "rb").read() == open(f"{W}/d2.safetensors", "rb").read(),
              f"{scheme}: chunked dequantize differs")
t, meta = read_st(f"{W}/d1.safetensors")
check(sorted(t) == ["a", "b", "c"] and t["c"][2] == np.arange(10, dtype=np.int32).tobytes(), f"dequantized names {sorted(t)}")

# peak RSS of quantize/dequantize stays far below the input (a 64 MiB tensor)
big = rng.standard_normal((4096, 4096)).astype(np.float32)
np.save(f"{W}/big.npy", big)
del big
# (GNU time runs lofp from a small process: a child forked from this Python would inherit its
# high-water mark across exec)
if os.path.exists("/usr/bin/time"):
    for args in (["quantize", "--scheme", "nvfp4", f"{W}/big.npy", f"{W}/bigq.safetensors"],
                 ["dequantize", f"{W}/bigq.safetensors", f"{W}/bigd.npy"]):
        p = subprocess.run(["/usr/bin/time", "-f", "maxrss=%M", LOFP, *args], capture_output=True, text=True)
        kib = int(p.stderr.rsplit("maxrss=", 1)[1].split()[0]) if "maxrss=" in p.stderr else -1
        check(p.returncode == 0 and 0 < kib < 32 << 10, f"{args[0]} of a 64 MiB tensor: peak RSS {kib} KiB ({p.stderr[-200:]})")
else:
    print("note: /usr/bin/time missing; peak RSS not checked here (lofp bench io measures it)")
for f in ("big.npy", "bigq.safetensors", "bigd.npy"):
    os.unlink(f"{W}/{f}")

# ---- more than 4096 quantized tensors -----------------------------------------------------------
many = {f"t{i:05d}": rng.standard_normal((2, 32)).astype(np.float32) for i in range(4100)}
save_file(many, f"{W}/many_in.safetensors")
run("quantize", "--scheme", "mxfp4", f"{W}/many_in.safetensors", f"{W}/many_q.safetensors")
p = run("dequantize", f"{W}/many_q.safetensors", f"{W}/many_d.safetensors")
t, meta = read_st(f"{W}/many_d.safetensors")
check(len(t) == 4100 and all(v[0] == "F32" for v in t.values()) and not any(k.endswith(".codes") for k in t),
      f"dequantize of 4100 tensors: {len(t)} tensors, {sum(k.endswith('.codes') for k in t)} left as codes")
check("t04099" in t and not any(k.startswith("lofp:") for k in meta), "tensor 4100 dequantized, metadata consumed")
p = run("inspect", f"{W}/many_q.safetensors")
check(p.stdout.count("mxfp4, rounding") == 4100, f"inspect lists {p.stdout.count('mxfp4, rounding')} of 4100")
run("layout", "convert", "--to", "swizzle-128x4", f"{W}/many_q.safetensors", f"{W}/many_l.safetensors")
t, meta = read_st(f"{W}/many_l.safetensors")
check(sum("layout=swizzle-128x4" in v for v in meta.values()) == 4100, "layout convert converts all 4100")
for f in ("many_in", "many_q", "many_d", "many_l"):
    os.unlink(f"{W}/{f}.safetensors")

# ---- long names, long paths ---------------------------------------------------------------------
names = ["n" * 255, "m" * 256, "L" * 300, "\u00e9" * 600]
save_file({n: rng.standard_normal((3, 64)).astype(np.float32) for n in names}, f"{W}/long.safetensors")
run("quantize", "--scheme", "nvfp4", f"{W}/long.safetensors", f"{W}/long_q.safetensors")
run("dequantize", f"{W}/long_q.safetensors", f"{W}/long_d.safetensors")
t, _ = read_st(f"{W}/long_d.safetensors")
check(sorted(t) == sorted(names), f"long names round trip: {[len(k) for k in t]}")
run("layout", "convert", "--to", "packed-u32", f"{W}/long_q.safetensors", f"{W}/long_l.safetensors")
_, meta = read_st(f"{W}/long_l.safetensors")
check(sum("layout=packed-u32" in v for v in meta.values()) == 4, f"layout convert of long names: {list(meta.values())[:1]}")
p = run("inspect", f"{W}/long_q.safetensors")
check(p.stdout.count("nvfp4, rounding") == 4, "inspect sees the long names")
# an output path of PATH_MAX - 10 bytes whose last component is 250 bytes
d = W
while len(d) + 1 + 250 < 4096 - 10:
    d += "/" + "d" * min(200, 4096 - 10 - 250 - 1 - len(d) - 1)
os.makedirs(d, exist_ok=True)
out = d + "/" + "o" * (4096 - 10 - len(d) - 1 - 12) + ".safetensors"
check(len(out) == 4086 and len(os.path.basename(out)) == 250, f"test setup: path {len(out)}, name {len(os.path.basename(out))}")
run("quantize", "--scheme", "mxfp4", f"{W}/long.safetensors", out)
run("quantize", "--scheme", "mxfp4", f"{W}/long.safetensors", out)
run("dequantize", out, out[:-13] + "d.safetensors")
check(os.path.exists(out) and not leftovers(d), f"long output path: exists={os.path.exists(out)}, leftovers={len(leftovers(d))}")

# ---- output = input -----------------------------------------------------------------------------
save_file({"w": x[:4, :64].copy()}, f"{W}/w.safetensors")
before = open(f"{W}/w.safetensors", "rb").read()
fails(["quantize", "--scheme", "mxfp4", f"{W}/w.safetensors", f"{W}/w.safetensors"], "same file", what="quantize w w")
os.symlink(f"{W}/w.safetensors", f"{W}/wlink.safetensors")
fails(["quantize", "--scheme", "mxfp4", f"{W}/w.safetensors", f"{W}/wlink.safetensors"], "same file", what="quantize w link")
fails(["quantize", "--scheme", "mxfp4", f"{W}/wlink.safetensors", f"{W}/w.safetensors"], "same file", what="quantize link w")
check(open(f"{W}/w.safetensors", "rb").read() == before and os.path.islink(f"{W}/wlink.safetensors"), "input intact")
run("quantize", "--scheme", "mxfp4", f"{W}/w.safetensors", f"{W}/wq.safetensors")
qb = open(f"{W}/wq.safetensors", "rb").read()
fails(["dequantize", f"{W}/wq.safetensors", f"{W}/wq.safetensors"], "same file", what="dequantize Q Q")
fails(["layout", "convert", "--to", "packed-u32", f"{W}/wq.safetensors", f"{W}/wq.safetensors"], "same file", what="layout convert Q Q")
check(open(f"{W}/wq.safetensors", "rb").read() == qb, "Q intact")

# ---- UltraQuant rotation overflow -----------------------------------------------------------------
xo = rng.standard_normal((3, 64)).astype(np.float32)
xo[1, :] = 3e38
xo[1, 7] = 3.3e38
np.save(f"{W}/ovf.npy", xo)
fails(["quantize", "--scheme", "ultraquant", f"{W}/ovf.npy", f"{W}/ovf.safetensors"], "'ovf'", str(64 + 7), "overflow")
check(not os.path.exists(f"{W}/ovf.safetensors") and not leftovers(W), "no output after the overflow error")
p = run("quantize", "--scheme", "ultraquant", "--propagate-nonfinite", f"{W}/ovf.npy", f"{W}/ovf.safetensors")
check("propagated" in p.stderr, f"propagation note: {p.stderr}")
# attention: K with such rows
q = rng.standard_normal((1, 2, 64)).astype(np.float32)
k = rng.standard_normal((1, 4, 1, 64)).astype(np.float32)
np.save(f"{W}/q.npy", q)
np.save(f"{W}/v.npy", k)
k[0, 2, 0, :] = 3e38
np.save(f"{W}/k.npy", k)
fails(["attention", "--q", f"{W}/q.npy", "--k", f"{W}/k.npy", "--v", f"{W}/v.npy", f"{W}/o.npy"], "K[0, 2, 0", "overflow", what="attention overflow")
k[0, 2, 0, :] = 1.0
np.save(f"{W}/k.npy", k)
run("attention", "--q", f"{W}/q.npy", "--k", f"{W}/k.npy", "--v", f"{W}/v.npy", f"{W}/o.npy")
fails(["attention", "--q", f"{W}/q.npy", "--k", f"{W}/k.npy", "--v", f"{W}/v.npy", f"{W}/o.safetensors"], ".npy", what="attention output name")
fails(["attention", "--q", f"{W}/q.npy", "--k", f"{W}/k.npy", "--v", f"{W}/v.npy", f"{W}/k.npy"], "same file", what="attention output = K")

# ---- strict numbers in options ----------------------------------------------------------------------
np.save(f"{W}/s.npy", x[:4, :64])
S = f"{W}/s.npy"
for opt, val, needle in [("--block", "abc", "--block"), ("--block", "4294967328", "--block"), ("--block", "64x", "--block"),
                         ("--threads", "-3", "--threads"), ("--threads", "0", "--threads"), ("--seed", "abc", "--seed"),
                         ("--seed", "18446744073709551616", "--seed"), ("--c", "nan", "--c"), ("--c", "-1", "--c"),
                         ("--pad-byte", "255", "--pad-byte"), ("--pad-byte", "7z", "--pad-byte")]:
    fails(["quantize", "--scheme", "mxfp4", opt, val, S, f"{W}/s.safetensors"], needle, what=f"quantize {opt} {val}")
A = ["attention", "--q", f"{W}/q.npy", "--k", f"{W}/k.npy", "--v", f"{W}/v.npy"]
fails(A + ["--tol", "nan", f"{W}/o.npy"], "--tol", what="--tol nan")
fails(A + ["--seq-lens", "4x", f"{W}/o.npy"], "--seq-lens", what="--seq-lens junk")
fails(A + ["--seq-lens", "4,4", f"{W}/o.npy"], "--seq-lens", what="--seq-lens too many")
fails(A + ["--threads", "-3", f"{W}/o.npy"], "--threads", what="attention --threads -3")
fails(["verify", "--tol", "nan", "a", "b", "c"], "--tol", what="verify --tol nan")
fails(["dequantize", "--threads", "x", f"{W}/wq.safetensors", f"{W}/o.npy"], "--threads", what="dequantize --threads x")

# ---- strict lofp: metadata, dtypes and shapes of codes/scales -------------------------------------------
t, meta = read_st(f"{W}/wq.safetensors")
good = meta["lofp:w"]
order = {k: t[k] for k in sorted(t)}


def with_meta(value, tensors=None):
    write_st(f"{W}/bad.safetensors", tensors or order, {"lofp:w": value})
    return ["dequantize", f"{W}/bad.safetensors", f"{W}/bad_out.safetensors"]


def sub(key, val):
    return ";".join(f"{k}={val}" if k == key else f"{k}={v}" for k, v in (kv.split("=", 1) for kv in good.split(";")))


for key, val, needle in [("rotate", "7", "rotate"), ("hadamard", "fft", "hadamard"), ("two_level", "yes", "two_level"),
                         ("shape", "[4,64", "shape"), ("shape", "[4,,64]", "shape"), ("shape", "[4,64]x", "shape"),
                         ("block", "32abc", "block"), ("block", "4294967328", "block"), ("pad_byte", "-1", "pad_byte"),
                         ("padded_k", "64 ", "padded_k"), ("c", "nan", "c"), ("source_dtype", "I32", "source_dtype"),
                         ("shape", "[4294967296,4294967296,0,64]", "shape"),
                         ("shape", "[18446744073709551615,18446744073709551615,64]", "shape"),
                         ("scheme", "mxfp5", "scheme")]:
    fails(with_meta(sub(key, val)), "'w'", needle, what=f"metadata {key}={val}")
# a shape whose product overflows, with zero-byte tensors that would match a wrapped size
ovf = dict(order)
ovf["w.codes"] = ("U8", [0, 32], b"")
ovf["w.scales"] = ("F8_E8M0", [0, 2], b"")
fails(with_meta(sub("shape", "[4611686018427387904,4,64]"), ovf), "'w'", what="shape overflow with 0-byte tensors")
fails(with_meta(sub("shape", "[0,64]"), ovf), "'w'", what="zero rows")
check(not os.path.exists(f"{W}/bad_out.safetensors"), "no output from bad metadata")
wrong = dict(order)
wrong["w.codes"] = ("I8",) + order["w.codes"][1:]
fails(with_meta(good, wrong), "w.codes", "I8", what="codes dtype")
wrong = dict(order)
wrong["w.scales"] = ("U8",) + order["w.scales"][1:]
fails(with_meta(good, wrong), "w.scales", "U8", what="scales dtype")
wrong = dict(order)
wrong["w.codes"] = ("U8", [1, 128], order["w.codes"][2])
fails(with_meta(good, wrong), "w.codes", "shape", what="codes shape")
run(*with_meta(good))   # the untouched metadata still works

# NVFP4 global scale 0 / negative / NaN
run("quantize", "--scheme", "nvfp4", f"{W}/w.safetensors", f"{W}/wn.safetensors")
t, meta = read_st(f"{W}/wn.safetensors")
for g in (0.0, -1.0, float("nan"), float("inf")):
    tt = {k: t[k] for k in sorted(t)}
    tt["w.global_scale"] = ("F32", [], struct.pack("<f", g))
    write_st(f"{W}/badg.safetensors", tt, meta)
    fails(["dequantize", f"{W}/badg.safetensors", f"{W}/badg_out.npy"], "global_scale", what=f"global {g}")

# ---- block bound, F64 range, UltraQuant K, --include, tensors that cannot be quantized ----------------
np.save(f"{W}/kb.npy", x[:1, :256])
t0 = time.time()
fails(["quantize", "--scheme", "mxfp8-e4m3", "--block", "268435456", "--pad", f"{W}/kb.npy", f"{W}/kb.safetensors"], "block", "K = 256", what="huge block")
check(time.time() - t0 < 5 and not os.path.exists(f"{W}/kb.safetensors"), "the huge block is refused before any work")
f64 = x[:2, :64].astype(np.float64)
f64[1, 5] = 1e300
np.save(f"{W}/f64.npy", f64)
fails(["quantize", "--scheme", "mxfp4", f"{W}/f64.npy", f"{W}/f64.safetensors"], "outside the fp32 range", str(64 + 5), what="1e300")
np.save(f"{W}/k96.npy", x[:2, :96])
fails(["quantize", "--scheme", "ultraquant", f"{W}/k96.npy", f"{W}/k96.safetensors"], "power of two", what="UltraQuant K=96")
fails(["quantize", "--scheme", "mxfp4", "--include", "nothing*", f"{W}/multi.safetensors", f"{W}/inc.safetensors"], "nothing*", "matches no tensor")
x9 = rng.standard_normal((1, 1, 1, 1, 1, 1, 1, 2, 32)).astype(np.float32)
save_file({"nine": x9, "ints": np.arange(4, dtype=np.int64)}, f"{W}/odd.safetensors")
p = run("quantize", "--scheme", "mxfp4", f"{W}/odd.safetensors", f"{W}/odd_q.safetensors")
check("'ints'" in p.stderr and "copied unchanged" in p.stderr, f"integer tensor reported: {p.stderr!r}")
t, _ = read_st(f"{W}/odd_q.safetensors")
check("nine.codes" in t and t["nine.codes"][1] == [1] * 7 + [2, 16], f"9-D tensor quantized: {sorted(t)}")
run("dequantize", f"{W}/odd_q.safetensors", f"{W}/odd_d.safetensors")
t, _ = read_st(f"{W}/odd_d.safetensors")
check(t["nine"][1] == list(x9.shape), "9-D round trip")
# 65 dimensions: more than numpy allows; the file is refused, naming it, the tensor and the bound
# (LOFP_MAX_NDIM, one bound for every shape the library reads)
write_st(f"{W}/d65.safetensors", {"deep": ("F32", [1] * 64 + [32], np.zeros(32, np.float32).tobytes())})
fails(["quantize", "--scheme", "mxfp4", f"{W}/d65.safetensors", f"{W}/d65_q.safetensors"],
      "d65.safetensors", "'deep'", "65 dimensions", "64 dimensions", what="65-D tensor")
check(not os.path.exists(f"{W}/d65_q.safetensors"), "65-D: an output was written")

# ---- a replaced output keeps its mode ---------------------------------------------------------------
os.chmod(f"{W}/wq.safetensors", 0o600)
run("quantize", "--scheme", "mxfp4", f"{W}/w.safetensors", f"{W}/wq.safetensors")
check(os.stat(f"{W}/wq.safetensors").st_mode & 0o7777 == 0o600, f"mode {oct(os.stat(f'{W}/wq.safetensors').st_mode)}")

# ---- SIGINT / SIGTERM / SIGHUP remove the temporary output ---------------------------------------------
slow = rng.standard_normal((1024, 4096)).astype(np.float32)
np.save(f"{W}/slow.npy", slow)
sdir = f"{W}/sig"
os.makedirs(sdir)
for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    proc = subprocess.Popen([LOFP, "quantize", "--scheme", "ultraquant", "--dense-hadamard", "--chunk-mib", "1",
                             f"{W}/slow.npy", f"{sdir}/out.safetensors"], stderr=subprocess.DEVNULL)
    seen = False
    for _ in range(20000):
        if leftovers(sdir):
            seen = True
            break
        if proc.poll() is not None:
            break
        time.sleep(0.0005)
    proc.send_signal(sig)
    rc = proc.wait()
    if seen and rc == -sig:
        check(not leftovers(sdir) and not os.path.exists(f"{sdir}/out.safetensors"),
              f"after {sig.name} the temporary file remains: {leftovers(sdir)}")
    else:
        print(f"note: {sig.name} run not observed mid-write (seen={seen}, rc={rc})")
    for f in os.listdir(sdir):
        os.unlink(f"{sdir}/{f}")

print(f"cli_robust: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
