"""lofp tensor files whose "lofp:NAME" metadata lies about the stored tensors: the
shape, the scale layout, the padded K, the per-tensor scale's dtype, sizes that overflow. Each file
is built here by hand (a valid safetensors container, lying metadata); `lofp import`, `lofp
inspect` and `lofp dequantize` must refuse it with exit status 1 and a message naming the file and
the tensor, never crash (under ASan too: run with an ASan build's lofp) and never write an output.
Before the library checked the metadata against the stored sizes, `lofp import` of the first case
read past the file's mapping (SIGBUS).

Run by script_qfile_hostile.sh as: python qfile_hostile.py LOFP_BINARY WORKDIR; tests/python/test_qfile.py
takes CASES and write_st from here for lofp.load."""
import json
import os
import struct
import subprocess
import sys

failures = []

VER = "0.1.0"


def meta(scheme="mxfp4", block=32, layout="linear", shape="[4,64]", kp=64, two_level=0, extra=""):
    return (f"scheme={scheme};rounding=rne;scale_rule={'ue4m3' if scheme == 'nvfp4' else 'floor'};block={block};"
            f"layout={layout};pad_byte=0;shape={shape};padded_k={kp};two_level={two_level};c=0.156000003;rotate=0;"
            f"hadamard=butterfly;seed=0;source_dtype=F32;lofp_version={VER}{extra}")


def write_st(path, tensors, md):
    """A safetensors file written by hand: tensors = {name: (dtype, shape, bytes)} in this order."""
    h, off, data = {"__metadata__": md}, 0, b""
    for k, (dt, shape, raw) in tensors.items():
        h[k] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        data += raw
    hj = json.dumps(h, separators=(",", ":")).encode()
    hj += b" " * (-len(hj) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj + data)


MX_CODES = ("U8", [4, 32], bytes(range(128)))
MX_SCALES = ("F8_E8M0", [4, 2], bytes([127] * 8))
NV_CODES = ("U8", [4, 32], bytes(range(128)))
NV_SCALES = ("F8_E4M3", [4, 4], bytes([0x38] * 16))
ONE_F32 = ("F32", [], struct.pack("<f", 448.0))

# name -> (tensors, metadata value, what the message must say besides file and tensor)
CASES = {
    # the finding: shape=[4096,64] over 128 code bytes
    "shape_lies": ({"w.codes": MX_CODES, "w.scales": MX_SCALES}, meta(shape="[4096,64]"), "[4096, 32]"),
    "shape_lies_3d": ({"w.codes": MX_CODES, "w.scales": MX_SCALES}, meta(shape="[4,4,64]"), "shape"),
    # scales claimed in a layout whose size differs from what is stored
    "layout_lies": ({"w.codes": MX_CODES, "w.scales": MX_SCALES}, meta(layout="swizzle-128x4"), "swizzle-128x4"),
    "layout_packed_lies": ({"w.codes": MX_CODES, "w.scales": MX_SCALES}, meta(layout="packed-u32"), "packed-u32"),
    # padded K that does not fit K and the block, and a padded K the codes were not sized for
    "padded_k_lies": ({"w.codes": MX_CODES, "w.scales": MX_SCALES}, meta(kp=128), "padded_k"),
    "padded_k_unpadded_codes": ({"w.codes": ("U8", [4, 24], bytes(96)), "w.scales": MX_SCALES},
                                meta(shape="[4,48]", kp=64), "w.codes"),
    # the block: more scales claimed than stored
    "block_lies": ({"w.codes": MX_CODES, "w.scales": MX_SCALES}, meta(block=64), "w.scales"),
    # scales of the wrong dtype, codes of the wrong dtype
    "scales_dtype_lies": ({"w.codes": MX_CODES, "w.scales": ("U8", [4, 2], bytes([127] * 8))}, meta(), "F8_E8M0"),
    "codes_dtype_lies": ({"w.codes": ("F8_E4M3", [4, 32], bytes(128)), "w.scales": MX_SCALES}, meta(), "U8"),
    # the NVFP4 per-tensor scale: wrong dtype, two values, missing, not positive
    "global_f16": ({"w.codes": NV_CODES, "w.scales": NV_SCALES, "w.global_scale": ("F16", [], struct.pack("<e", 448.0))},
                   meta("nvfp4", 16, two_level=1), "w.global_scale"),
    "global_bf16_pair": ({"w.codes": NV_CODES, "w.scales": NV_SCALES, "w.global_scale": ("BF16", [2], bytes(4))},
                         meta("nvfp4", 16, two_level=1), "w.global_scale"),
    "global_f32_pair": ({"w.codes": NV_CODES, "w.scales": NV_SCALES, "w.global_scale": ("F32", [2], bytes(8))},
                        meta("nvfp4", 16, two_level=1), "w.global_scale"),
    "global_missing": ({"w.codes": NV_CODES, "w.scales": NV_SCALES}, meta("nvfp4", 16, two_level=1), "w.global_scale"),
    "global_negative": ({"w.codes": NV_CODES, "w.scales": NV_SCALES, "w.global_scale": ("F32", [], struct.pack("<f", -2.0))},
                        meta("nvfp4", 16, two_level=1), "w.global_scale"),
    # sizes that overflow size_t
    "shape_overflows": ({"w.codes": MX_CODES, "w.scales": MX_SCALES}, meta(shape="[18446744073709551615,64]"), "overflow"),
    "shape_product_overflows": ({"w.codes": MX_CODES, "w.scales": MX_SCALES},
                                meta(shape="[4294967296,4294967296,64]"), "overflow"),
    "padded_k_huge": ({"w.codes": MX_CODES, "w.scales": MX_SCALES},
                      meta(shape="[4,18446744073709551584]", kp=18446744073709551584), "overflow"),
    # a scales or codes tensor that is missing (import dropped a tensor without codes, exit 0)
    "scales_missing": ({"w.codes": MX_CODES}, meta(), "w.scales"),
    "codes_missing": ({"w.scales": MX_SCALES, "b": ("F32", [2], bytes(8))}, meta(), "w.codes"),
}


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg, flush=True)


def main():
    lofp_bin, work = sys.argv[1], sys.argv[2]
    for name, (tensors, value, needle) in CASES.items():
        path = os.path.join(work, f"{name}.safetensors")
        write_st(path, tensors, {"lofp:w": value, "format": "pt"})
        before = open(path, "rb").read()
        for cmd, out in (("import", os.path.join(work, f"{name}.imported")), ("inspect", None),
                         ("dequantize", os.path.join(work, f"{name}.d.safetensors"))):
            args = [lofp_bin, cmd, path] + ([out] if out else [])
            p = subprocess.run(args, capture_output=True, text=True)
            err = p.stderr
            what = f"{name}: lofp {cmd}"
            check(p.returncode == 1, f"{what}: exit status {p.returncode} (want 1; negative is a signal): {err!r}")
            check("ERROR: AddressSanitizer" not in err and "runtime error" not in err, f"{what}: sanitizer report: {err[-2000:]}")
            check(f"{name}.safetensors" in err, f"{what}: the message does not name the file: {err!r}")
            check("'w" in err, f"{what}: the message does not name the tensor: {err!r}")
            check(needle in err, f"{what}: the message does not say {needle!r}: {err!r}")
            if out:
                check(not os.path.exists(out), f"{what}: wrote {out}")
        check(open(path, "rb").read() == before, f"{name}: the input changed")
    # a consistent file next to them still reads (the checks refuse lies, not lofp's own files)
    good = os.path.join(work, "good.safetensors")
    write_st(good, {"w.codes": MX_CODES, "w.scales": MX_SCALES}, {"lofp:w": meta(), "format": "pt"})
    for args in (["import", good, os.path.join(work, "good.imported")], ["inspect", good],
                 ["dequantize", good, os.path.join(work, "good.d.safetensors")]):
        p = subprocess.run([lofp_bin] + args, capture_output=True, text=True)
        check(p.returncode == 0, f"good file: lofp {args[0]}: {p.stderr!r}")
    print(f"qfile_hostile: {len(CASES)} hostile files x 3 commands, {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
