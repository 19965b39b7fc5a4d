"""The type stubs of the public modules (python/lofp/**/*.pyi, written by scripts/gen_stubs.py)
against the code that runs: every public name is in its stub, every stub function and method has
the runtime's parameters (names, kinds, defaults, annotations) and return annotation, dataclass
fields match, and everything public has a docstring. lofp.torch is compared at runtime where
torch is installed; the --check run of the generator compares every stub with the sources
(torch or not)."""
import ast
import dataclasses
import importlib
import inspect
import os
import pathlib
import subprocess
import sys

import pytest

import lofp

PKG = pathlib.Path(lofp.__file__).parent
STUBS = {"lofp": "__init__.pyi", "lofp.layout": "layout.pyi", "lofp.kv": "kv.pyi", "lofp.torch": "torch.pyi",
         "lofp.eval": "eval/__init__.pyi", "lofp.calibrate": "calibrate.pyi"}


def _module(name):
    if name == "lofp.torch":
        pytest.importorskip("torch")
    return importlib.import_module(name)


def _stub(name):
    return ast.parse((PKG / STUBS[name]).read_text())


def _norm(text):
    """An annotation in one spelling (quotes and spacing as ast.unparse writes them)."""
    if text is None:
        return None
    if not isinstance(text, str):
        text = inspect.formatannotation(text)
    return ast.unparse(ast.parse(text.strip("'\""), mode="eval"))


def _stub_params(fn: ast.FunctionDef, drop_first: bool):
    a = fn.args
    out = []
    pos = a.posonlyargs + a.args
    defaults = [None] * (len(pos) - len(a.defaults)) + list(a.defaults)
    for i, (p, d) in enumerate(zip(pos, defaults)):
        kind = inspect.Parameter.POSITIONAL_ONLY if i < len(a.posonlyargs) else inspect.Parameter.POSITIONAL_OR_KEYWORD
        out.append((p.arg, kind, d, p.annotation))
    if a.vararg:
        out.append((a.vararg.arg, inspect.Parameter.VAR_POSITIONAL, None, a.vararg.annotation))
    for p, d in zip(a.kwonlyargs, a.kw_defaults):
        out.append((p.arg, inspect.Parameter.KEYWORD_ONLY, d, p.annotation))
    if a.kwarg:
        out.append((a.kwarg.arg, inspect.Parameter.VAR_KEYWORD, None, a.kwarg.annotation))
    return out[1:] if drop_first else out


REGEN = " (a public signature changed: run python3 scripts/gen_stubs.py)"


def _check_function(where, fn: ast.FunctionDef, obj, drop_first=False):
    try:
        _compare_function(where, fn, obj, drop_first)
    except AssertionError as e:
        raise AssertionError(f"{e}{REGEN}") from None


def _compare_function(where, fn: ast.FunctionDef, obj, drop_first):
    sig = inspect.signature(obj)
    rt = list(sig.parameters.values())
    st = _stub_params(fn, drop_first)
    assert [(p.name, p.kind) for p in rt] == [(n, k) for n, k, _, _ in st], f"{where}: parameters differ"
    for p, (n, k, d, ann) in zip(rt, st):
        if d is None:
            assert p.default is inspect.Parameter.empty, f"{where}({n}): the stub has no default"
        elif isinstance(d, ast.Constant) and d.value is Ellipsis:
            assert p.default is not inspect.Parameter.empty, f"{where}({n}): the runtime has no default"
        else:
            assert p.default == ast.literal_eval(d), f"{where}({n}): default {p.default!r} vs {ast.unparse(d)}"
        rann = None if p.annotation is inspect.Parameter.empty else p.annotation
        assert _norm(rann) == _norm(None if ann is None else ast.unparse(ann)), f"{where}({n}): annotation differs"
    rret = None if sig.return_annotation is inspect.Signature.empty else sig.return_annotation
    assert fn.returns is not None, f"{where}: the stub has no return annotation"
    assert _norm(rret) == _norm(ast.unparse(fn.returns)), f"{where}: return annotation differs"


def _doc(obj, where):
    assert (inspect.getdoc(obj) or "").strip(), f"{where} has no docstring"


@pytest.mark.parametrize("modname", list(STUBS))
def test_stub_matches_runtime(modname):
    mod = _module(modname)
    tree = _stub(modname)
    stub_all = None
    defined = {}
    for n in tree.body:
        if isinstance(n, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in n.targets):
            stub_all = ast.literal_eval(n.value)
        elif isinstance(n, (ast.FunctionDef, ast.ClassDef)):
            defined[n.name] = n
        elif isinstance(n, ast.AnnAssign):
            defined[n.target.id] = n
        elif isinstance(n, ast.ImportFrom):
            for al in n.names:
                defined[al.asname or al.name] = n
    assert stub_all is not None and sorted(stub_all) == sorted(mod.__all__), f"{modname}: __all__ differs{REGEN}"
    for name in mod.__all__:
        assert name in defined, f"{modname}.{name} is not in the stub{REGEN}"
        node, obj = defined[name], getattr(mod, name)
        where = f"{modname}.{name}"
        if isinstance(node, ast.FunctionDef):
            _check_function(where, node, obj)
            _doc(obj, where)
        elif isinstance(node, ast.ClassDef):
            assert inspect.isclass(obj), where
            _doc(obj, where)
            _check_class(where, node, obj)


def _check_class(where, node: ast.ClassDef, cls):
    fields = [n for n in node.body if isinstance(n, ast.AnnAssign)]
    if dataclasses.is_dataclass(cls):
        rf = [(f.name, _norm(f.type)) for f in dataclasses.fields(cls) if not f.name.startswith("_")]
        assert rf == [(f.target.id, _norm(ast.unparse(f.annotation))) for f in fields], f"{where}: fields differ{REGEN}"
    for n in node.body:
        if not isinstance(n, ast.FunctionDef):
            continue
        decos = [ast.unparse(d) for d in n.decorator_list]
        attr = inspect.getattr_static(cls, n.name)
        w = f"{where}.{n.name}"
        if "property" in decos:
            assert isinstance(attr, property), f"{w} is not a property at runtime"
            _check_function(w, n, attr.fget)
            _doc(attr, w)
            continue
        if "classmethod" in decos:
            assert isinstance(attr, classmethod), f"{w} is not a classmethod at runtime"
            _check_function(w, n, attr.__func__)
        elif "staticmethod" in decos:
            assert isinstance(attr, staticmethod), f"{w} is not a staticmethod at runtime"
            _check_function(w, n, attr.__func__)
        else:
            _check_function(w, n, attr)
        if not n.name.startswith("__"):
            _doc(getattr(cls, n.name), w)


def test_stubs_are_current_with_the_sources():
    """scripts/gen_stubs.py --check: the committed stubs are what the sources generate (this
    covers lofp.torch where torch is not installed)."""
    src = os.environ.get("LOFP_SOURCE_DIR")
    if not src:
        pytest.skip("LOFP_SOURCE_DIR (the source tree) is not set")
    r = subprocess.run([sys.executable, os.path.join(src, "scripts", "gen_stubs.py"), "--check"], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr


def test_help_of_quantize_is_enough():
    doc = inspect.getdoc(lofp.quantize)
    for word in ("scheme", "rounding", "scale_layout", "global_scale", "profile", "threads", "out", "Returns"):
        assert word in doc
