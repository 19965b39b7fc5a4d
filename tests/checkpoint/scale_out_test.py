#!/usr/bin/env python3
"""The scale-out recipes of scripts/scale-out/ without a scheduler (docs/CHECKPOINTS.md
"Scale-out"; the real Slurm run is tests/checkpoint/slow_slurm.sh, `make test-slurm`):

- k8s-convert-job.yaml and k8s-merge-job.yaml parse (PyYAML) and have the shape the recipe needs:
  an Indexed batch/v1 Job whose N variable equals its completions, a merge Job on the same image,
  claim and mount, both running `lofp convert` with the same options;
- each manifest's own container command, run here by /bin/sh once per completion index with
  JOB_COMPLETION_INDEX set as Kubernetes sets it (0..N-1) and the mount path mapped to a temporary
  directory, then the merge's, gives a directory equal file for file and byte for byte to one
  `lofp convert` process;
- slurm_convert.sh --local (the job script's own task and merge code, run in sequence with
  SLURM_ARRAY_TASK_ID = 1..N) does too, for N = 1, 2 and the shard count; bad N is refused.
The model is built with numpy + safetensors (scale_out_model.py), never by lofp.

usage: scale_out_test.py LOFP_BINARY SOURCE_DIR
"""
import hashlib
import shlex
import os
import shutil
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))


def tree(path):
    """relative name -> sha256 of every file under path, hidden files included."""
    out = {}
    for d, _, files in os.walk(path):
        for f in files:
            p = os.path.join(d, f)
            out[os.path.relpath(p, path)] = hashlib.sha256(open(p, "rb").read()).hexdigest()
    return out


def same_tree(got, want, what):
    g, w = tree(got), tree(want)
    assert g.keys() == w.keys(), f"{what}: files differ: extra {sorted(g.keys() - w.keys())}, missing {sorted(w.keys() - g.keys())}"
    bad = [k for k in w if g[k] != w[k]]
    assert not bad, f"{what}: these files differ from the single-process conversion: {bad}"


def container(doc):
    c = doc["spec"]["template"]["spec"]["containers"]
    assert len(c) == 1, c
    return c[0], doc["spec"]["template"]["spec"]


def lofp_args(c):
    """The lofp convert words of a container's `sh -c` script, and the script."""
    assert c["command"] == ["/bin/sh", "-c"], c["command"]
    script = c["args"][0]
    words = shlex.split(script)
    assert words[:3] == ["exec", "lofp", "convert"], script
    return words[3:], script


def check_manifests(src):
    d = os.path.join(src, "scripts", "scale-out")
    conv = list(yaml.safe_load_all(open(os.path.join(d, "k8s-convert-job.yaml"))))
    merge = list(yaml.safe_load_all(open(os.path.join(d, "k8s-merge-job.yaml"))))
    assert len(conv) == 1 and len(merge) == 1, (len(conv), len(merge))
    conv, merge = conv[0], merge[0]
    for j in (conv, merge):
        assert j["apiVersion"] == "batch/v1" and j["kind"] == "Job", j
    s = conv["spec"]
    assert s["completionMode"] == "Indexed", s
    n = s["completions"]
    assert isinstance(n, int) and n >= 1 and 1 <= s["parallelism"] <= n, s
    c, pod = container(conv)
    mc, mpod = container(merge)
    env = {e["name"]: e["value"] for e in c.get("env", [])}
    assert env.get("N") == str(n), f"the N variable {env.get('N')!r} is not spec.completions {n}"
    assert pod["restartPolicy"] in ("Never", "OnFailure") and mpod["restartPolicy"] in ("Never", "OnFailure")
    assert c["image"] == mc["image"], (c["image"], mc["image"])
    assert pod["volumes"] == mpod["volumes"], (pod["volumes"], mpod["volumes"])
    assert c["volumeMounts"] == mc["volumeMounts"], (c["volumeMounts"], mc["volumeMounts"])
    sa, sscript = lofp_args(c)
    ma, mscript = lofp_args(mc)
    assert "JOB_COMPLETION_INDEX" in sscript and "--shard" in sa and "--merge-index" in ma
    i = sa.index("--shard")
    slice_opts = sa[:i] + sa[i + 2:-2]
    merge_opts = [a for a in ma[:-2] if a != "--merge-index"]
    assert slice_opts == merge_opts, f"the merge's options {merge_opts} are not the slices' {slice_opts}"
    assert sa[-2:] == ma[-2:], (sa[-2:], ma[-2:])
    mount = c["volumeMounts"][0]["mountPath"]
    assert all(p.startswith(mount + "/") for p in sa[-2:]), (sa[-2:], mount)
    return n, mount, sscript, mscript, slice_opts


def run_pod(script, env, bindir, mount, root):
    """Runs a container's script as the pod would, the volume mapped to root."""
    script = script.replace(mount + "/", root + "/")
    e = dict(os.environ, PATH=bindir + os.pathsep + os.environ["PATH"], **env)
    p = subprocess.run(["/bin/sh", "-c", script], env=e, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"{script} ({env}) failed: {p.stderr}"


def main():
    lofp, src = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    tmp = tempfile.mkdtemp(prefix="lofp_scale_out_")
    try:
        n, mount, sscript, mscript, opts = check_manifests(src)
        print(f"manifests: Indexed Job of {n} completions, merge Job, options {' '.join(opts)}")
        root = os.path.join(tmp, "vol")
        subprocess.run([sys.executable, os.path.join(HERE, "scale_out_model.py"), os.path.join(root, "in"),
                        "--shards", str(max(n, 4)), "--layers-per-shard", "1", "--hidden", "128"],
                       check=True, stdout=subprocess.DEVNULL)
        ref = os.path.join(tmp, "ref")
        subprocess.run([lofp, "convert", *opts, os.path.join(root, "in"), ref], check=True)
        bindir = os.path.join(tmp, "bin")
        os.makedirs(bindir)
        os.symlink(lofp, os.path.join(bindir, "lofp"))
        for i in reversed(range(n)):                    # any order: indexes are independent
            run_pod(sscript, {"JOB_COMPLETION_INDEX": str(i), "N": str(n)}, bindir, mount, root)
        run_pod(mscript, {}, bindir, mount, root)
        same_tree(os.path.join(root, "out"), ref, "Kubernetes recipe")
        print(f"k8s: {n} indexed pods + merge, run by sh here: identical to one process")

        conv = os.path.join(src, "scripts", "scale-out", "slurm_convert.sh")
        shards = max(n, 4)
        env = dict(os.environ, LOFP=lofp)
        for k in sorted({1, 2, shards}):
            out = os.path.join(tmp, f"slurm{k}")
            p = subprocess.run(["bash", conv, "--local", os.path.join(root, "in"), out, str(k), *opts],
                               env=env, capture_output=True, text=True, timeout=300)
            assert p.returncode == 0, f"slurm_convert.sh --local N={k}: {p.stderr}"
            same_tree(out, ref, f"slurm_convert.sh --local N={k}")
            print(f"slurm_convert.sh --local N={k}: identical to one process")
        for bad in ("0", "x", "-1", ""):
            p = subprocess.run(["bash", conv, "--local", os.path.join(root, "in"), os.path.join(tmp, "bad"), bad, *opts],
                               env=env, capture_output=True, text=True, timeout=60)
            assert p.returncode != 0 and not os.path.exists(os.path.join(tmp, "bad")), (bad, p.returncode, p.stderr)
        # N beyond the shard count: lofp refuses, naming the shard count, and the script stops
        p = subprocess.run(["bash", conv, "--local", os.path.join(root, "in"), os.path.join(tmp, "many"),
                            str(shards + 1), *opts], env=env, capture_output=True, text=True, timeout=60)
        assert p.returncode != 0 and str(shards) in p.stderr, (p.returncode, p.stderr)
        print("PASS")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
