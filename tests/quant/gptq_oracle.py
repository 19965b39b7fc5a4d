"""An independent GPTQ in numpy (and ml_dtypes for the element and scale encoders), compared bit for
bit with lofp_gptq_prepare + lofp_gptq_quantize_rows through the lofp_gptq_tool helper.

It follows the operation order docs/QUALITY.md fixes (the same loops, float64 for the factor,
float32 for the sweep) but shares no code with lofp: the codes come from ml_dtypes' float4_e2m1fn /
float8_e4m3fn conversions, the UE4M3 block scale from float8_e4m3fn, the E8M0 exponent from frexp.

Cases: NVFP4, MXFP4, MXFP8-E4M3; with and without act order; a dead column; K not a multiple of
the lazy block; H = X^T X of random X.

Usage: gptq_oracle.py PATH/TO/lofp_gptq_tool
"""
import os
import subprocess
import sys
import tempfile

import ml_dtypes
import numpy as np

F32 = np.float32
ELEM = {  # scheme -> (ml_dtypes type, max, emax_elem, block)
    "nvfp4": (ml_dtypes.float4_e2m1fn, 6.0, 2, 16),
    "mxfp4": (ml_dtypes.float4_e2m1fn, 6.0, 2, 32),
    "mxfp8-e4m3": (ml_dtypes.float8_e4m3fn, 448.0, 8, 32),
}


def prepare(h, damp, act_order):
    """U (float64, upper, H^-1 = U^T U in sweep order), perm, dead."""
    k = h.shape[0]
    d = np.array([float(h[i, i]) for i in range(k)])
    dead = d == 0.0
    d[dead] = 1.0
    perm = sorted(range(k), key=lambda i: (-d[i], i)) if act_order else list(range(k))
    s = 0.0
    for i in range(k):
        s = s + d[i]
    add = damp * (s / k)
    p = np.array(perm)
    a = h.astype(np.float64)[np.ix_(p, p)]
    for i in range(k):
        a[i, i] = d[p[i]] + add
    # H = V V^T with V upper: right-looking from the last column
    v_mat = np.zeros((k, k))
    for j in range(k - 1, -1, -1):
        piv = a[j, j]
        if not piv > 0.0:
            raise ValueError("not positive definite")
        r = np.sqrt(piv)
        v_mat[j, j] = r
        v = a[:j, j] / r
        v_mat[:j, j] = v
        a[:j, :j] = a[:j, :j] - np.outer(v, v)
    # U = V^-1 row by row from the last, sums in decreasing p
    u = np.zeros((k, k))
    for i in range(k - 1, -1, -1):
        acc = np.zeros(k)
        for q in range(k - 1, i, -1):
            acc[q:] = acc[q:] + v_mat[i, q] * u[q, q:]
        u[i, i] = 1.0 / v_mat[i, i]
        u[i, i + 1:] = (-acc[i + 1:]) / v_mat[i, i]
    return u, perm, dead


def e4m3_code(x):
    return int(np.array([x], dtype=F32).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)[0])


def e4m3_value(code):
    return F32(np.array([code], dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(F32)[0])


def block_scale(scheme, vals, g):
    """The scale rule: NVFP4 UE4M3(clamp(bmax/6)), MX FLOOR. vals float32."""
    if scheme == "nvfp4":
        bmax = F32(np.max(np.abs(vals * g)))
        bs = bmax / F32(6.0)
        bs = min(max(bs, F32(1e-12)), F32(448.0))
        return e4m3_code(bs)
    emax = ELEM[scheme][2]
    amax = F32(np.max(np.abs(vals)))
    if amax == 0:
        return 0
    _, e = np.frexp(amax)
    return int(min(max(int(e) - 1 - emax + 127, 0), 254))


def encode(scheme, v, sc, g):
    """(code, dequantized value) of float32 v at scale code sc."""
    t, mx, _, _ = ELEM[scheme]
    if scheme == "nvfp4":
        sv = e4m3_value(sc)
        bq = sv if sv > 0 else F32(2.0 ** -9)
        e = (v * g) / bq
        e = min(max(e, F32(-6.0)), F32(6.0))
        q = np.array([e], dtype=F32).astype(t)
        return int(q.view(np.uint8)[0]) & 0xF, (F32(q.astype(F32)[0]) * sv) / g
    sv = F32(2.0 ** (sc - 127))
    e = v / sv
    e = min(max(e, F32(-mx)), F32(mx))
    q = np.array([e], dtype=F32).astype(t)
    code = int(q.view(np.uint8)[0]) & (0xF if t == ml_dtypes.float4_e2m1fn else 0xFF)
    return code, F32(q.astype(F32)[0]) * sv


def sweep(scheme, w_mat, u32, perm, dead, g, lazy):
    rows, k = w_mat.shape
    blk = ELEM[scheme][3]
    nb = k // blk
    pos = np.empty(k, dtype=np.int64)
    pos[np.array(perm)] = np.arange(k)
    codes = np.zeros((rows, k), dtype=np.uint8)
    scales = np.zeros((rows, nb), dtype=np.uint8)
    for r in range(rows):
        w = np.array([F32(0) if dead[perm[p]] else w_mat[r, perm[p]] for p in range(k)], dtype=F32)
        fixed = {}
        for i1 in range(0, k, lazy):
            i2 = min(i1 + lazy, k)
            err = np.zeros(i2 - i1, dtype=F32)
            for p in range(i1, i2):
                c = perm[p]
                b = c // blk
                if b not in fixed:
                    vals = np.array([w[pos[cc]] for cc in range(b * blk, b * blk + blk)], dtype=F32)
                    fixed[b] = block_scale(scheme, vals, g)
                code, deq = encode(scheme, w[p], fixed[b], g)
                codes[r, c] = code
                e = (w[p] - deq) / u32[p, p]
                err[p - i1] = e
                w[p + 1:i2] = w[p + 1:i2] - e * u32[p, p + 1:i2]
            if i2 < k:
                s = np.zeros(k - i2, dtype=F32)
                for p in range(i1, i2):
                    s = s + err[p - i1] * u32[p, i2:]
                w[i2:] = w[i2:] - s
        for b, sc in fixed.items():
            scales[r, b] = sc
    return codes, scales


def run_case(tool, tmp, scheme, rows, k, act_order, lazy, damp, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((4 * k, k)).astype(F32)
    x[:, :] = x @ (np.eye(k, dtype=F32) + F32(0.3) * rng.standard_normal((k, k)).astype(F32))
    x[:, 5] = 0  # a dead column
    h = (x.astype(np.float64).T @ x.astype(np.float64)).astype(F32)
    w_mat = rng.standard_normal((rows, k)).astype(F32)
    w_mat[1, 7] = F32(9.0)  # an outlier
    wp, hp, out = (os.path.join(tmp, n) for n in ("w.f32", "h.f32", "out"))
    w_mat.tofile(wp)
    h.tofile(hp)
    subprocess.run([tool, scheme, str(rows), str(k), str(act_order), str(lazy), repr(damp), wp, hp, out],
                   check=True)
    g = np.fromfile(out + ".global", dtype=F32)[0]
    if scheme == "nvfp4":
        amax = F32(np.max(np.abs(w_mat)))
        g_ref = (F32(1.0) / amax) * F32(2688.0)
        assert g == g_ref, (g, g_ref)
    u, perm, dead = prepare(h, damp, act_order)
    u32 = u.astype(F32)
    got_u = np.fromfile(out + ".u", dtype=F32).reshape(k, k)
    got_perm = np.fromfile(out + ".perm", dtype=np.uint32)
    fails = []
    if list(got_perm) != perm:
        fails.append("perm")
    if not np.array_equal(got_u.view(np.uint32), u32.view(np.uint32)):
        n = int(np.sum(got_u.view(np.uint32) != u32.view(np.uint32)))
        fails.append(f"U ({n} of {k * k} entries differ)")
    codes, scales = sweep(scheme, w_mat, u32, perm, dead, g, lazy)
    got_s = np.fromfile(out + ".scales", dtype=np.uint8).reshape(rows, -1)
    raw = np.fromfile(out + ".codes", dtype=np.uint8)
    if scheme in ("nvfp4", "mxfp4"):
        got_c = np.empty(raw.size * 2, dtype=np.uint8)
        got_c[0::2] = raw & 0xF
        got_c[1::2] = raw >> 4
        got_c = got_c.reshape(rows, k)
    else:
        got_c = raw.reshape(rows, k)
    if not np.array_equal(got_s, scales):
        fails.append(f"scales ({int(np.sum(got_s != scales))} differ)")
    if not np.array_equal(got_c, codes):
        fails.append(f"codes ({int(np.sum(got_c != codes))} differ)")
    name = f"{scheme} rows={rows} k={k} act_order={act_order} lazy={lazy} damp={damp}"
    print(("FAIL " if fails else "ok   ") + name + (": " + ", ".join(fails) if fails else ""))
    return not fails


def main():
    tool = sys.argv[1]
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        seed = 1
        for scheme in ("nvfp4", "mxfp4", "mxfp8-e4m3"):
            for act_order in (0, 1):
                for k, lazy in ((96, 40), (128, 128), (64, 7)):
                    ok &= run_case(tool, tmp, scheme, 16, k, act_order, lazy, 0.01, seed)
                    seed += 1
        ok &= run_case(tool, tmp, "nvfp4", 5, 96, 1, 32, 0.1, seed)
    print("gptq_oracle: " + ("all cases match" if ok else "MISMATCH"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
