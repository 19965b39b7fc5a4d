#!/usr/bin/env python3
"""`lofp convert` / `lofp import` as a careless and a hostile user runs them (docs/CHECKPOINTS.md
"Directory reading rules", docs/CLI.md "convert"): the output never replaces or lands inside the
input, bad option values are refused before anything is read, special files never block or fill
the disk, links of Hugging Face's hub cache keep working, a signal leaves no temporary behind,
lying indexes and configs are errors that name the file. Every input is built here with numpy,
safetensors and gguf-py; every check reads the files back without lofp.

usage: safety_test.py LOFP_BINARY [test names...]   (lofp's Python package is tested too when
`import lofp` works, as script_ckpt_safety.sh arranges)
"""
import hashlib
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import traceback

import ml_dtypes
import numpy as np
from safetensors.numpy import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ckpt_models as cm  # noqa: E402

LOFP = None
TMP = None
TESTS = []
SHARD1, SHARD2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"


def test(fn):
    TESTS.append(fn)
    return fn


def run(*args, ok=True, timeout=120):
    p = subprocess.run([LOFP, *args], capture_output=True, text=True, timeout=timeout)
    if "Sanitizer" in p.stderr or "runtime error:" in p.stderr:
        raise AssertionError(f"lofp {' '.join(args)}: sanitizer report:\n{p.stderr}")
    if ok and p.returncode != 0:
        raise AssertionError(f"lofp {' '.join(args)} failed:\n{p.stderr}")
    if not ok and p.returncode == 0:
        raise AssertionError(f"lofp {' '.join(args)} succeeded but should have failed:\n{p.stderr}")
    if not ok and p.returncode < 0:
        raise AssertionError(f"lofp {' '.join(args)} died by signal {-p.returncode}:\n{p.stderr}")
    return p


def fails(args, *needles, timeout=60):
    p = run(*args, ok=False, timeout=timeout)
    for n in needles:
        assert n in p.stderr, f"lofp {' '.join(args)}: message lacks {n!r}: {p.stderr}"
    return p.stderr


def digest_tree(path):
    """name -> sha256 of every file under path (links followed), to prove an input unchanged."""
    out = {}
    if os.path.isfile(path):
        return {"": hashlib.sha256(open(path, "rb").read()).hexdigest()}
    for d, _, files in os.walk(path):
        for f in files:
            p = os.path.join(d, f)
            out[os.path.relpath(p, path)] = hashlib.sha256(open(p, "rb").read()).hexdigest()
    return out


def no_temps(*dirs):
    for d in dirs:
        if os.path.isdir(d):
            left = [f for f in os.listdir(d) if "lofp-tmp" in f or ".tmp-" in f or "lofp-removing" in f]
            assert not left, f"temporaries left in {d}: {left}"


_llama = None


def llama():
    """The two-shard llama directory of ckpt_models (built once, never modified: copy it)."""
    global _llama
    if _llama is None:
        _llama = os.path.join(TMP, "llama")
        cm.build_llama(_llama)
    return _llama


def copy_llama(name):
    d = os.path.join(TMP, name)
    shutil.copytree(llama(), d)
    return d


def make_gguf(path):
    import gguf
    rng = np.random.default_rng(1)
    w = gguf.GGUFWriter(path, "llama")
    w.add_block_count(1)
    w.add_string("general.name", "tiny")
    w.add_tensor("token_embd.weight", (rng.standard_normal((64, 64)) * 0.02).astype(np.float32))
    for nm in ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_up", "ffn_down"):
        w.add_tensor(f"blk.0.{nm}.weight", (rng.standard_normal((64, 64)) * 0.02).astype(np.float32))
    w.add_tensor("blk.0.attn_norm.weight", np.ones(64, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# ---- (i) the output is never the input ------------------------------------------------------

@test
def out_is_input_gguf():
    g = os.path.join(TMP, "a.gguf")
    make_gguf(g)
    before = digest_tree(g)
    fails(["convert", "--to", "gguf", g, g], "is the input")
    # another spelling of the same path, and a hard link to it
    os.makedirs(os.path.join(TMP, "sub"), exist_ok=True)
    fails(["convert", "--to", "gguf", g, os.path.join(TMP, "sub", "..", "a.gguf")], "is the input")
    hl = os.path.join(TMP, "hard.gguf")
    os.link(g, hl)
    fails(["convert", "--to", "gguf", g, hl], "hard link")
    fails(["convert", "--to", "gguf", hl, g], "is the input")
    assert digest_tree(g) == before, "the input GGUF changed"
    # a file OUT beside it is fine
    run("convert", "--to", "gguf", "--quiet", g, os.path.join(TMP, "b.gguf"))
    assert digest_tree(g) == before
    no_temps(TMP)


@test
def out_is_or_holds_input_dir():
    d = copy_llama("inplace")
    before = digest_tree(d)
    fails(["convert", "--to", "modelopt", d, d], "is the input")
    fails(["convert", "--to", "modelopt", d, d + "/"], "is the input")
    fails(["convert", "--to", "modelopt", d, os.path.join(d, "out")], "inside the input")
    fails(["convert", "--to", "modelopt", d, os.path.join(d, "a", "b", "..", "out")], "inside the input")
    # --shard writes into an existing OUT: OUT = IN or IN inside OUT would overwrite the shards
    fails(["convert", "--to", "modelopt", "--shard", "1/2", d, d], "is the input")
    fails(["convert", "--to", "modelopt", "--shard", "1/2", d, TMP], "inside the output")
    fails(["convert", "--to", "modelopt", "--shard", "1/1", os.path.join(d, SHARD1), d], "inside the output")
    fails(["convert", "--to", "modelopt", "--merge-index", d, d], "is the input")
    fails(["import", d, d], "is the input")
    fails(["import", d, os.path.join(d, "x")], "inside the input")
    # through a link to the input directory, and a link to a directory above it
    alias = os.path.join(TMP, "alias_of_inplace")
    os.symlink(d, alias)
    fails(["convert", "--to", "modelopt", d, os.path.join(alias, "out")], "inside the input")
    fails(["convert", "--to", "modelopt", alias, os.path.join(d, "out")], "inside the input")
    up = os.path.join(TMP, "alias_of_tmp")
    os.symlink(TMP, up)
    fails(["convert", "--to", "modelopt", "--shard", "1/2", d, up], "symbolic link")
    fails(["convert", "--to", "modelopt", "--shard", "1/2", d, os.path.join(up, "")], "symbolic link")
    fails(["convert", "--to", "modelopt", "--shard", "1/2", d, os.path.join(up, ".")], "inside the output")
    assert digest_tree(d) == before, "the input directory changed"
    assert sorted(os.listdir(d)) == sorted(os.listdir(llama()))


@test
def out_is_symlink():
    g = os.path.join(TMP, "s.gguf")
    make_gguf(g)
    target = os.path.join(TMP, "target.gguf")
    open(target, "wb").write(b"keep")
    ln = os.path.join(TMP, "link.gguf")
    os.symlink(target, ln)
    fails(["convert", "--to", "gguf", g, ln], "symbolic link")
    assert os.path.islink(ln) and open(target, "rb").read() == b"keep"
    # a link to an empty directory, and a dangling link
    os.makedirs(os.path.join(TMP, "empty_target"))
    dl = os.path.join(TMP, "dirlink")
    os.symlink(os.path.join(TMP, "empty_target"), dl)
    fails(["convert", "--to", "modelopt", llama(), dl], "symbolic link")
    fails(["convert", "--to", "modelopt", llama(), dl + "/"], "symbolic link")
    fails(["convert", "--to", "modelopt", llama(), dl + "//"], "symbolic link")
    fails(["import", g, dl], "symbolic link")
    assert os.path.islink(dl) and os.listdir(os.path.join(TMP, "empty_target")) == []
    dang = os.path.join(TMP, "dangling")
    os.symlink(os.path.join(TMP, "nowhere"), dang)
    fails(["convert", "--to", "modelopt", llama(), dang], "symbolic link")
    assert os.path.islink(dang) and not os.path.exists(os.path.join(TMP, "nowhere"))
    no_temps(TMP)


@test
def empty_out_path():
    fails(["convert", "--to", "modelopt", llama(), ""], "output path is empty")
    fails(["import", llama(), ""], "output path is empty")
    fails(["convert", "--to", "modelopt", "", os.path.join(TMP, "x")], "input path is empty")


# ---- (p) --shard and (v) --jobs / --threads ---------------------------------------------------

@test
def shard_parsing():
    out = os.path.join(TMP, "sh_out")
    for bad in ("1/-1", "1/2junk", "4294967297/4294967298", "0/2", "3/2", "-1/2", " 1/2", "1/ 2", "+1/2", "1//2",
                "1", "/2", "1/", "a/b", "1/0", "0x1/2"):
        fails(["convert", "--to", "modelopt", "--shard", bad, llama(), out], "--shard")
        assert not os.path.exists(out), f"--shard {bad!r} wrote {out}"
    # N above the shard count: every slice would be empty or some would be
    fails(["convert", "--to", "modelopt", "--shard", "1/8", llama(), out], "2 shard file(s)", "at most 2")
    fails(["convert", "--to", "modelopt", "--shard", "3/3", llama(), out], "at most 2")
    assert not os.path.exists(out)
    g = os.path.join(TMP, "sh.gguf")
    make_gguf(g)
    fails(["convert", "--to", "gguf", "--shard", "1/1", g, os.path.join(TMP, "sh_o.gguf")], "--shard")
    run("convert", "--to", "modelopt", "--quiet", "--shard", "2/2", llama(), out)
    # the slice's record for --merge-index (.lofp-slice-2-of-2.json) sits beside its shard
    assert sorted(os.listdir(out)) == [".lofp-slice-2-of-2.json", SHARD2], os.listdir(out)


@test
def jobs_threads_parsing():
    out = os.path.join(TMP, "jt_out")
    for opt in ("--jobs", "--threads"):
        for bad in ("-1", "abc", "100000", "0", "", "1.5", "2x", "257", "18446744073709551617"):
            fails(["convert", "--to", "modelopt", opt, bad, llama(), out], opt)
            assert not os.path.exists(out)
    fails(["convert", "--to", "modelopt", llama(), out, "--jobs"], "--jobs needs a value")
    fails(["import", llama(), out, "--dtype"], "--dtype needs a value")
    fails(["convert", "--to", "modelopt", "--shard", "1/2", "--merge-index", llama(), out], "separate steps")
    assert not os.path.exists(out)
    run("convert", "--to", "modelopt", "--quiet", "--jobs", "2", "--threads", "256", llama(), out)
    assert os.path.isfile(os.path.join(out, "config.json"))


# ---- (q) a .safetensors the index does not list ---------------------------------------------

@test
def unlisted_safetensors():
    d = copy_llama("unlisted")
    extra = {"stray.weight": np.ones((4, 4), ml_dtypes.bfloat16)}
    save_file(extra, os.path.join(d, "consolidated.safetensors"))
    for args, out in ((["convert", "--to", "compressed-tensors", "--quiet"], d + "_ct"),
                      (["convert", "--to", "modelopt"], d + "_mo")):
        p = run(*args, d, out)
        assert "warning:" in p.stderr and "consolidated.safetensors" in p.stderr and "not listed" in p.stderr, p.stderr
        assert open(os.path.join(out, "consolidated.safetensors"), "rb").read() == \
            open(os.path.join(d, "consolidated.safetensors"), "rb").read(), "not carried over unchanged"
        idx = json.load(open(os.path.join(out, "model.safetensors.index.json")))
        assert "consolidated.safetensors" not in set(idx["weight_map"].values())
    p = run("import", "--quiet", d + "_mo", d + "_imp")
    assert "consolidated.safetensors" in p.stderr and "not listed" in p.stderr, p.stderr
    assert os.path.isfile(os.path.join(d + "_imp", "consolidated.safetensors"))


# ---- (r) special files and links ---------------------------------------------------------------

def expect_quick_failure(args, *needles):
    t0 = time.time()
    err = fails(args, *needles, timeout=30)
    assert time.time() - t0 < 25, "took too long"
    return err


@test
def fifo_and_devices():
    d = copy_llama("fifo_cfg")
    os.remove(os.path.join(d, "config.json"))
    os.mkfifo(os.path.join(d, "config.json"))
    expect_quick_failure(["convert", "--to", "modelopt", d, d + "_o"], "config.json", "FIFO")
    expect_quick_failure(["inspect", d], "config.json", "FIFO")
    expect_quick_failure(["verify-checkpoint", llama(), d], "config.json", "FIFO")
    assert not os.path.exists(d + "_o")
    # a copied file that is a FIFO, a link to /dev/zero, a socket, a link to a directory
    for name, make, needle in (
            ("tokenizer.json", lambda p: os.mkfifo(p), "FIFO"),
            ("merges.txt", lambda p: os.symlink("/dev/zero", p), "character device"),
            ("sock", lambda p: socket.socket(socket.AF_UNIX).bind(p), "socket"),
            ("linked_dir", lambda p: os.symlink(TMP, p), "directory"),
            ("dangling.txt", lambda p: os.symlink(os.path.join(TMP, "none"), p), "does not resolve")):
        d = copy_llama("special_" + name)
        p = os.path.join(d, name)
        if os.path.lexists(p):
            os.remove(p)
        make(p)
        expect_quick_failure(["convert", "--to", "modelopt", d, d + "_o"], name, needle)
        assert not os.path.exists(d + "_o")
        no_temps(TMP)
        expect_quick_failure(["import", d, d + "_i"], name)
    # inside a real sub-folder too
    d = copy_llama("special_sub")
    os.makedirs(os.path.join(d, "1_Pooling"))
    os.symlink("/dev/zero", os.path.join(d, "1_Pooling", "config.json"))
    expect_quick_failure(["convert", "--to", "modelopt", d, d + "_o"], "1_Pooling", "character device")
    # a shard that is a link to /dev/zero, the input itself a FIFO
    d = copy_llama("special_shard")
    os.remove(os.path.join(d, SHARD2))
    os.symlink("/dev/zero", os.path.join(d, SHARD2))
    expect_quick_failure(["convert", "--to", "modelopt", d, d + "_o"], SHARD2, "regular file")
    # a directory where a file belongs: a shard, config.json, the index (a FIFO)
    d = os.path.join(TMP, "dir_shard")
    os.makedirs(os.path.join(d, "model.safetensors"))
    expect_quick_failure(["convert", "--to", "modelopt", d, d + "_o"], "model.safetensors", "regular file")
    d = copy_llama("dir_config")
    os.remove(os.path.join(d, "config.json"))
    os.makedirs(os.path.join(d, "config.json"))
    expect_quick_failure(["convert", "--to", "modelopt", d, d + "_o"], "config.json", "directory")
    d = copy_llama("fifo_index")
    os.remove(os.path.join(d, "model.safetensors.index.json"))
    os.mkfifo(os.path.join(d, "model.safetensors.index.json"))
    expect_quick_failure(["import", d, d + "_o"], "model.safetensors.index.json", "FIFO")
    f = os.path.join(TMP, "in_fifo")
    os.mkfifo(f)
    expect_quick_failure(["convert", "--to", "gguf", f, os.path.join(TMP, "o.gguf")], "FIFO")
    expect_quick_failure(["import", f, os.path.join(TMP, "o_dir")], "FIFO")
    expect_quick_failure(["inspect", f], "regular file")
    expect_quick_failure(["verify-checkpoint", f, llama()], "FIFO")
    expect_quick_failure(["convert", "--to", "modelopt", "--input-scales", f, llama(), os.path.join(TMP, "o_is")], "FIFO")


@test
def hub_cache_links():
    """snapshots/<rev>/ made of links into ../../blobs/ (huggingface_hub's cache layout), a real
    sub-folder holding a link: converts and imports, the output holds regular files."""
    root = os.path.join(TMP, "hub", "models--x--tiny")
    blobs, snap = os.path.join(root, "blobs"), os.path.join(root, "snapshots", "abc123")
    os.makedirs(blobs)
    os.makedirs(os.path.join(snap, "1_Pooling"))
    src = llama()
    files = [f for f in os.listdir(src)] + ["1_Pooling/config.json"]
    open(os.path.join(TMP, "pool.json"), "w").write('{"pooling": "mean"}')
    for f in files:
        real = os.path.join(src, f) if f in os.listdir(src) else os.path.join(TMP, "pool.json")
        data = open(real, "rb").read()
        h = hashlib.sha256(data).hexdigest()
        open(os.path.join(blobs, h), "wb").write(data)
        rel = os.path.relpath(os.path.join(blobs, h), os.path.dirname(os.path.join(snap, f)))
        os.symlink(rel, os.path.join(snap, f))
    out = os.path.join(TMP, "hub_out")
    run("convert", "--to", "modelopt", "--quiet", snap, out)
    for f in ("tokenizer.json", "generation_config.json", "1_Pooling/config.json"):
        p = os.path.join(out, f)
        assert os.path.isfile(p) and not os.path.islink(p), f
        assert open(p, "rb").read() == open(os.path.join(snap, f), "rb").read(), f
    run("import", "--quiet", out, out + "_imp")
    ref = os.path.join(TMP, "hub_ref")
    run("convert", "--to", "modelopt", "--quiet", src, ref)
    for f in (SHARD1, SHARD2):
        assert open(os.path.join(out, f), "rb").read() == open(os.path.join(ref, f), "rb").read(), f


# ---- (u) signals -----------------------------------------------------------------------------

_big = None


def big_model():
    """Eight 16 MiB bf16 shards: long enough to be stopped mid-way."""
    global _big
    if _big is None:
        _big = os.path.join(TMP, "big")
        rng = np.random.default_rng(7)
        t = {}
        for l in range(8):
            t[f"model.layers.{l}.mlp.up_proj.weight"] = (rng.standard_normal((4096, 2048)) * 0.02).astype(
                ml_dtypes.bfloat16)
        shards = [(f"model-{l + 1:05d}-of-00008.safetensors", (lambda l: lambda n: f".{l}." in n)(l)) for l in range(8)]
        cm.write_dir(_big, t, shards, cm.LLAMA_CONFIG)
    return _big


def default_signals():
    """lofp keeps a signal ignored at start ignored (nohup); a shell running this test in the
    background ignores SIGINT for its children, so the child starts from the defaults."""
    for sg in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sg, signal.SIG_DFL)


def stop_midway(args, ready, sig, out):
    """Starts lofp, waits until ready(pid) is true (its temporaries exist), freezes it with
    SIGSTOP, checks they still exist (so the conversion is certainly unfinished, however loaded
    the machine), sends sig and SIGCONT; returns (exit status, stderr). A run that finished
    before it could be frozen is repeated (OUT removed, or out() called when it is a function)
    up to five times."""
    for _ in range(5):
        p = subprocess.Popen([LOFP, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             preexec_fn=default_signals)
        t0 = time.time()
        while not ready(p.pid) and p.poll() is None and time.time() - t0 < 60:
            time.sleep(0.001)
        stopped = False
        if p.poll() is None:
            os.kill(p.pid, signal.SIGSTOP)
            stopped = ready(p.pid)
            if stopped:
                os.kill(p.pid, sig)
            os.kill(p.pid, signal.SIGCONT)
        rc = p.wait(timeout=120)
        err = p.stderr.read().decode()
        if stopped:
            return rc, err
        if rc != 0:
            raise AssertionError(f"lofp {' '.join(args)} failed before the signal: {err}")
        if callable(out):
            out()
        elif os.path.isdir(out):
            shutil.rmtree(out)
        elif os.path.exists(out):
            os.remove(out)
    raise AssertionError(f"lofp {' '.join(args)} finished five times before it could be stopped")


def early(d):
    """A shard being written in d and at most two of the eight done: most of the work is left."""
    try:
        names = os.listdir(d)
    except OSError:
        return False
    done = [f for f in names if f.endswith(".safetensors") and not f.startswith(".")]
    return any(".tmp-" in f for f in names) and len(done) <= 2


def temps_in(d, pid):
    return [f for f in os.listdir(d) if f"lofp-tmp-{pid}" in f] if os.path.isdir(d) else []


@test
def signals_remove_temporaries():
    src = big_model()
    par = os.path.join(TMP, "sig")
    os.makedirs(par)
    for i, sig in enumerate((signal.SIGINT, signal.SIGTERM, signal.SIGHUP)):
        out = os.path.join(par, f"out{i}")

        def staged_shard(pid, i=i):
            return early(os.path.join(par, f".out{i}.lofp-tmp-{pid}"))
        rc, err = stop_midway(["convert", "--to", "modelopt", "--threads", "1", src, out], staged_shard, sig, out)
        assert rc == -sig, f"exit status {rc}, not killed by {sig}: {err}"
        assert not os.path.exists(out), "OUT appeared"
        no_temps(par)
    # import of a quantized model
    q = os.path.join(TMP, "big_mo")
    run("convert", "--to", "modelopt", "--quiet", src, q)
    out = os.path.join(par, "imp")
    rc, err = stop_midway(["import", "--dtype", "f32", q, out],
                          lambda pid: early(os.path.join(par, f".imp.lofp-tmp-{pid}")), signal.SIGINT, out)
    assert rc == -signal.SIGINT, (rc, err)
    assert not os.path.exists(out)
    no_temps(par)
    # --shard slices write into OUT directly: the shard being written is a temporary there
    out = os.path.join(par, "sliced")
    rc, err = stop_midway(["convert", "--to", "modelopt", "--shard", "1/1", src, out],
                          lambda pid: early(out), signal.SIGTERM, out)
    assert rc == -signal.SIGTERM, (rc, err)
    no_temps(out, par)
    # GGUF from a llama directory: the temporary file beside OUT
    g = os.path.join(par, "o.gguf")
    big_gguf = os.path.join(TMP, "big.gguf")
    import gguf
    w = gguf.GGUFWriter(big_gguf, "llama")
    w.add_block_count(8)
    rng = np.random.default_rng(3)
    for l in range(8):
        w.add_tensor(f"blk.{l}.ffn_up.weight", (rng.standard_normal((4096, 2048)) * 0.02).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    def gguf_early(d, pid):
        """The temporary GGUF (io's ".o.gguf.tmp-<random>") holds less than a third of the ~38 MB it
        will hold."""
        t = [f for f in os.listdir(d) if f.startswith(".o.gguf.tmp-")]
        try:
            return bool(t) and os.path.getsize(os.path.join(d, t[0])) < 12 << 20
        except OSError:
            return False
    rc, err = stop_midway(["convert", "--to", "gguf", big_gguf, g],
                          lambda pid: gguf_early(par, pid), signal.SIGINT, g)
    assert rc == -signal.SIGINT, (rc, err)
    assert not os.path.exists(g)
    no_temps(par)


@test
def killed_slice_rerun():
    """SIGKILL (no handler runs: what a scheduler's kill, the OOM killer or a lost node does) of a
    --shard slice mid-write leaves the shard's temporary but never a torn shard under its name;
    running that slice again removes the temporary, and the merged result equals a whole
    conversion byte for byte (docs/CHECKPOINTS.md "Scale-out")."""
    src = big_model()
    whole = os.path.join(TMP, "kill_whole")
    run("convert", "--to", "modelopt", "--quiet", "--threads", "1", src, whole)
    out = os.path.join(TMP, "kill_sliced")
    run("convert", "--to", "modelopt", "--quiet", "--threads", "1", "--shard", "1/2", src, out)
    names = sorted(f for f in os.listdir(src) if f.endswith(".safetensors"))
    second = names[4:]                                  # slice 2 of 2: shards 5..8

    def mid_second(pid):
        have = os.listdir(out)
        return any(f.startswith("." + second[1]) and ".tmp-" in f for f in have) and second[-1] not in have
    rc, err = stop_midway(["convert", "--to", "modelopt", "--threads", "1", "--shard", "2/2", src, out],
                          mid_second, signal.SIGKILL,
                          lambda: [os.remove(os.path.join(out, f)) for f in second if os.path.exists(os.path.join(out, f))])
    assert rc == -signal.SIGKILL, (rc, err)
    have = os.listdir(out)
    left = [f for f in have if ".tmp-" in f]
    assert left, f"SIGKILL left no temporary (the slice was not killed mid-write?): {have}"
    for f in have:                                      # no torn file under a final name
        if not f.startswith("."):
            assert open(os.path.join(out, f), "rb").read() == open(os.path.join(whole, f), "rb").read(), f
    assert second[-1] not in have and "config.json" not in have, have
    fails(["convert", "--to", "modelopt", "--merge-index", src, out], "nothing written")
    run("convert", "--to", "modelopt", "--quiet", "--threads", "1", "--shard", "2/2", src, out)
    assert not [f for f in os.listdir(out) if ".tmp-" in f], os.listdir(out)
    # a second run of slice 1, killed after the first had finished: the merge removes its leftover
    with open(os.path.join(out, "." + names[0] + ".tmp-0123456789ab"), "wb") as f:
        f.write(b"partial")
    run("convert", "--to", "modelopt", "--quiet", "--merge-index", src, out)
    assert digest_tree(out) == digest_tree(whole), "re-run slice + merge differs from a whole conversion"
    assert sorted(os.listdir(out)) == sorted(os.listdir(whole)), (os.listdir(out), os.listdir(whole))


@test
def nohup_keeps_sighup_ignored():
    """A SIGHUP ignored by the caller (nohup) stays ignored: the conversion completes."""
    src = big_model()
    out = os.path.join(TMP, "nohup_out")
    p = subprocess.Popen([LOFP, "convert", "--to", "modelopt", "--quiet", src, out], stderr=subprocess.PIPE,
                         preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    t0 = time.time()
    while not temps_in(TMP, p.pid) and p.poll() is None and time.time() - t0 < 60:
        time.sleep(0.002)
    p.send_signal(signal.SIGHUP)
    assert p.wait(timeout=120) == 0, p.stderr.read()
    assert os.path.isfile(os.path.join(out, "config.json"))


# ---- lying indexes, configs and directories -------------------------------------------------------

def with_index(name, edit):
    d = copy_llama(name)
    ip = os.path.join(d, "model.safetensors.index.json")
    idx = json.load(open(ip))
    edit(d, idx)
    json.dump(idx, open(ip, "w"))
    return d


@test
def lying_indexes():
    cases = [
        ("dotdot", lambda d, i: i["weight_map"].update({"model.norm.weight": "../llama/" + SHARD2}), "not a plain file name"),
        ("abs", lambda d, i: i["weight_map"].update({"model.norm.weight": os.path.join(llama(), SHARD2)}),
         "not a plain file name"),
        ("dotdot_bare", lambda d, i: i["weight_map"].update({"model.norm.weight": ".."}), "not a plain file name"),
        ("dot", lambda d, i: i["weight_map"].update({"model.norm.weight": "."}), "not a plain file name"),
        ("empty_name", lambda d, i: i["weight_map"].update({"model.norm.weight": ""}), "not a plain file name"),
        ("not_string", lambda d, i: i["weight_map"].update({"model.norm.weight": 3}), "not a file name"),
        ("wrong_shard", lambda d, i: i["weight_map"].update({"model.norm.weight": SHARD1}), "model.norm.weight"),
        ("ghost", lambda d, i: i["weight_map"].update({"model.ghost.weight": SHARD1}), "model.ghost.weight"),
        ("missing_entry", lambda d, i: i["weight_map"].pop("model.norm.weight"), "not in the index"),
        ("no_map", lambda d, i: i.pop("weight_map"), "weight_map"),
        ("long_name", lambda d, i: i["weight_map"].update({"model.norm.weight": "x" * 300 + ".safetensors"}),
         "x" * 20),
    ]
    for name, edit, needle in cases:
        d = with_index("idx_" + name, edit)
        fails(["convert", "--to", "modelopt", d, d + "_o"], needle)
        fails(["import", d, d + "_i"])
        fails(["inspect", d], needle)
        assert not os.path.exists(d + "_o") and not os.path.exists(d + "_i")
        no_temps(TMP)
    # one tensor twice in the weight_map (a duplicate JSON key): the JSON parser refuses the key
    d = copy_llama("dup_key")
    ip = os.path.join(d, "model.safetensors.index.json")
    text = open(ip).read()
    text = text.replace('"weight_map": {', '"weight_map": {"model.norm.weight": "%s", ' % SHARD1, 1)
    open(ip, "w").write(text)
    fails(["convert", "--to", "modelopt", d, d + "_o"], "model.safetensors.index.json", "duplicate key 'model.norm.weight'")
    # the same tensor in two shards (the index names one of them)
    d = copy_llama("dup_tensor")
    extra = {"model.norm.weight": np.ones(cm.H, ml_dtypes.bfloat16)}
    t = dict(extra)
    from safetensors.numpy import load_file
    t.update(load_file(os.path.join(d, SHARD1)))
    save_file(t, os.path.join(d, SHARD1), metadata={"format": "pt"})
    fails(["convert", "--to", "modelopt", d, d + "_o"], "model.norm.weight", "both")
    # one shard under two names (a hard link): every tensor is in both
    d = copy_llama("twice")
    os.link(os.path.join(d, SHARD2), os.path.join(d, "again.safetensors"))
    ip = os.path.join(d, "model.safetensors.index.json")
    idx = json.load(open(ip))
    idx["weight_map"]["model.norm.weight"] = "again.safetensors"
    json.dump(idx, open(ip, "w"))
    fails(["convert", "--to", "modelopt", d, d + "_o"], "again.safetensors")


@test
def degenerate_directories():
    d = os.path.join(TMP, "empty_dir")
    os.makedirs(d)
    fails(["convert", "--to", "modelopt", d, d + "_o"], "no .safetensors")
    fails(["import", d, d + "_i"], "no .safetensors")
    open(os.path.join(d, "config.json"), "w").write(json.dumps(cm.LLAMA_CONFIG))
    fails(["convert", "--to", "modelopt", d, d + "_o"], "no .safetensors")
    fails(["convert", "--to", "gguf", d, d + ".gguf"])
    assert not os.path.exists(d + "_o") and not os.path.exists(d + ".gguf")
    # two unindexed safetensors
    d = os.path.join(TMP, "two_unindexed")
    os.makedirs(d)
    for f in ("a.safetensors", "b.safetensors"):
        save_file({"x.weight": np.ones((16, 16), np.float32)}, os.path.join(d, f))
    fails(["convert", "--to", "modelopt", d, d + "_o"], "no model.safetensors.index.json")
    # names at the file system's limit (255 bytes): a carried-over file, OUT, a GGUF OUT; the
    # temporaries beside them must fit too
    d = copy_llama("long_names")
    long_file = "t" * 250 + ".json"
    open(os.path.join(d, long_file), "w").write("{}")
    out = os.path.join(TMP, "o" * 250)
    run("convert", "--to", "modelopt", "--quiet", d, out)
    assert open(os.path.join(out, long_file)).read() == "{}"
    g = os.path.join(TMP, "long_in.gguf")
    make_gguf(g)
    run("convert", "--to", "gguf", "--quiet", g, os.path.join(TMP, "g" * 250 + ".gguf"))
    no_temps(TMP)
    # a very long tensor name converts (or fails cleanly) and round-trips its name
    d = os.path.join(TMP, "long_tensor")
    long = "model.layers.0." + "a" * 4000 + ".weight"
    cm.write_dir(d, {long: np.ones((32, 64), ml_dtypes.bfloat16)}, [("model.safetensors", lambda n: True)],
                 cm.LLAMA_CONFIG, extra_files=False)
    run("convert", "--to", "modelopt", "--quiet", d, d + "_o")
    from safetensors import safe_open
    with safe_open(os.path.join(d + "_o", "model.safetensors"), "np") as f:
        assert long in f.keys()


@test
def config_claims_without_tensors():
    d = copy_llama("claims_ct")
    cfg = dict(cm.LLAMA_CONFIG, quantization_config={"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized"})
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
    fails(["convert", "--to", "modelopt", d, d + "_o"], "config.json", "compressed-tensors", "no shard holds a quantized tensor")
    fails(["import", d, d + "_i"], "no shard holds a quantized tensor")
    d = copy_llama("claims_mo")
    json.dump({"quantization": {"quant_algo": "NVFP4"}}, open(os.path.join(d, "hf_quant_config.json"), "w"))
    fails(["import", d, d + "_i"], "hf_quant_config.json", "no shard holds a quantized tensor")
    d = copy_llama("claims_fp8")
    cfg = dict(cm.LLAMA_CONFIG, quantization_config={"quant_method": "fp8"})
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
    fails(["convert", "--to", "modelopt", d, d + "_o"], "'fp8'", "does not read")
    assert "fp8" in run("inspect", d).stdout + run("inspect", d).stderr
    assert not os.path.exists(d + "_o") and not os.path.exists(d + "_i")


# ---- the Python package -------------------------------------------------------------------------

@test
def python_api():
    try:
        import lofp
    except ImportError:
        print("  (lofp's Python package not importable: python_api skipped)")
        return
    g = os.path.join(TMP, "py.gguf")
    make_gguf(g)
    before = digest_tree(g)
    for dst in (g, os.path.join(TMP, ".", "py.gguf")):
        try:
            lofp.convert(g, dst, "gguf")
            raise AssertionError("lofp.convert(p, p) did not raise")
        except lofp.Error as e:
            assert "is the input" in str(e), e
    try:
        lofp.import_checkpoint(g, os.fsencode(g))
        raise AssertionError("lofp.import_checkpoint(p, p) did not raise")
    except lofp.Error as e:
        assert "is the input" in str(e), e
    assert digest_tree(g) == before
    for kw in ({"jobs": -1}, {"jobs": "abc"}, {"jobs": 100000}, {"threads": 0}, {"threads": True},
               {"threads": 1.5}, {"jobs": 2 ** 32 + 1}):
        try:
            lofp.convert(llama(), os.path.join(TMP, "py_o"), "modelopt", **kw)
            raise AssertionError(f"{kw} accepted")
        except lofp.Error as e:
            assert list(kw)[0] in str(e), e
    for fn in (lambda: lofp.convert(llama(), "", "modelopt"), lambda: lofp.import_checkpoint(g, "")):
        try:
            fn()
            raise AssertionError("an empty output path was accepted")
        except lofp.Error as e:
            assert "empty" in str(e), e
    assert not os.path.exists(os.path.join(TMP, "py_o"))


def main():
    global LOFP, TMP
    LOFP = os.path.abspath(sys.argv[1])
    only = sys.argv[2:]
    TMP = tempfile.mkdtemp(prefix="lofp_safety_")
    passed = failed = 0
    try:
        for t in TESTS:
            if only and t.__name__ not in only:
                continue
            try:
                t()
                passed += 1
                print(f"PASS {t.__name__}", flush=True)
            except Exception:
                failed += 1
                print(f"FAIL {t.__name__}", flush=True)
                traceback.print_exc()
    finally:
        for d, dirs, files in os.walk(TMP):
            for x in dirs:
                p = os.path.join(d, x)
                if not os.path.islink(p):
                    os.chmod(p, stat.S_IRWXU)
        shutil.rmtree(TMP, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
