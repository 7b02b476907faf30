"""What ``docs/contributing.rst`` says about the tree, checked on the source."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

import ranking_plugins
import ranking_plugins.kernel

PACKAGE = Path(ranking_plugins.__file__).parent


def _kernel_imports() -> list[tuple[str, int, str, list[str]]]:
    """(file, line, module, names) of each import from the kernel outside ``kernel/``."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if (PACKAGE / "kernel") in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "ranking_plugins.kernel"
            ):
                names = [alias.name for alias in node.names]
                found.append((path.name, node.lineno, node.module or "", names))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("ranking_plugins.kernel."):
                        found.append((path.name, node.lineno, alias.name, []))
    return found


def test_other_modules_import_the_kernel_from_its_package() -> None:
    imports = _kernel_imports()
    assert imports  # the walk sees the modules that use the kernel
    deep = [
        (f, line, module) for f, line, module, _ in imports if module != "ranking_plugins.kernel"
    ]
    assert deep == []
    exported = set(ranking_plugins.kernel.__all__)
    unexported = [(f, line, n) for f, line, _, names in imports for n in names if n not in exported]
    assert unexported == []


# -- the layering of the tree ------------------------------------------------------------

#: the kernel's stages, in the order data flows through them: a module imports
#: only from its own stage or an earlier one (type-only imports included)
KERNEL_STAGES = {
    "ranking_plugins.kernel.flags": 0,
    "ranking_plugins.kernel.host_reads": 0,
    "ranking_plugins.kernel.inputs": 1,
    "ranking_plugins.kernel.ranking": 2,
    "ranking_plugins.kernel.statistics": 3,
    "ranking_plugins.kernel.catalogue": 4,
    "ranking_plugins.kernel.ranked_batch": 4,
}

#: the import paths of release 0.2.0, each with a name it exports
PUBLIC_PATHS = {
    "ranking_plugins": "rank_metrics",
    "ranking_plugins.functional": "rank_metrics",
    "ranking_plugins.options": "Options",
    "ranking_plugins.embeddings": "EmbeddingScores",
    "ranking_plugins.torchmetrics": "RetrievalMRR",
    "ranking_plugins.torchmetrics_functional": "retrieval_reciprocal_rank",
    "ranking_plugins.ignite": "MRR",
    "ranking_plugins.lightning": "RankingMetricsCallback",
    "ranking_plugins.pytrec_eval": "RelevanceEvaluator",
    "ranking_plugins.ir_measures": "iter_calc",
    "ranking_plugins.compare": "compare",
    "ranking_plugins.significance": "paired_t_test",
    "ranking_plugins.cli": "main",
}


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, module, names) of every import of the package in ``path``, at any depth."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ranking_plugins"):
            found.append((node.lineno, node.module or "", [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("ranking_plugins"):
                    found.append((node.lineno, alias.name, []))
    return found


def _owner(module: str, modules: dict[str, Path]) -> str:
    """The package that holds ``module`` (a package holds itself)."""
    if modules[module].name == "__init__.py":
        return module
    return module.rpartition(".")[0]


def _target(module: str, name: str, modules: dict[str, Path]) -> str:
    """The module an import of ``name`` from ``module`` reads (a submodule, or ``module``)."""
    return f"{module}.{name}" if f"{module}.{name}" in modules else module


def test_no_private_name_is_imported_from_another_package() -> None:
    modules = _modules()
    crossing = []
    for module, path in modules.items():
        for line, source, names in _imports(path):
            for name in names:
                private = name.startswith("_") and not name.startswith("__")
                target = _target(source, name, modules)
                if not private or target not in modules or target == f"{source}.{name}":
                    continue  # a public name, or a module (the package's own _validation)
                if _owner(target, modules) != _owner(module, modules):
                    crossing.append(f"{path.relative_to(PACKAGE)}:{line} {source}.{name}")
    assert crossing == []


def _stage(module: str) -> int | None:
    for prefix, stage in KERNEL_STAGES.items():
        if module == prefix or module.startswith(prefix + "."):
            return stage
    return None


def test_the_kernel_stages_import_downward_only() -> None:
    modules = _modules()
    upward = []
    for module, path in modules.items():
        stage = _stage(module)
        if stage is None:
            continue
        for line, source, names in _imports(path):
            for target in {_target(source, n, modules) for n in names} or {source}:
                other = _stage(target)
                if other is not None and other > stage:
                    upward.append(f"{path.relative_to(PACKAGE)}:{line} imports {target}")
    assert upward == []
    assert {_stage(m) for m in modules if m.startswith("ranking_plugins.kernel.")} >= {0, 1, 2, 3}


def test_no_import_circle() -> None:
    modules = _modules()
    graph = {
        module: {
            target
            for _, source, names in _imports(path)
            for target in ({_target(source, n, modules) for n in names} or {source})
            if target in modules and target != module
        }
        for module, path in modules.items()
    }
    # a package's __init__ importing its own submodules is the package, not a circle
    for module in graph:
        graph[module] = {t for t in graph[module] if not module.startswith(t + ".")}
    state: dict[str, int] = {}
    circles: list[list[str]] = []

    def visit(module: str, trail: list[str]) -> None:
        state[module] = 1
        for nxt in sorted(graph[module]):
            if state.get(nxt) == 1:
                circles.append([*trail[trail.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, [*trail, nxt])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert circles == []


def test_the_top_level_shows_the_faces() -> None:
    top = [
        p.name
        for p in PACKAGE.glob("*.py")
        if p.name not in ("__init__.py", "__main__.py") and len(p.read_text().splitlines()) > 12
    ]
    assert len(top) <= 14, sorted(top)
    for face in ("kernel", "torchmetrics", "ignite", "runs", "cli", "compare"):
        assert (PACKAGE / face / "__init__.py").is_file(), face


@pytest.mark.parametrize("path", sorted(PUBLIC_PATHS))
def test_every_import_path_of_release_0_2_0_still_works(path: str) -> None:
    if path in ("ranking_plugins.torchmetrics", "ranking_plugins.torchmetrics_functional"):
        pytest.importorskip("torchmetrics")
    if path == "ranking_plugins.ignite":
        pytest.importorskip("ignite")
    if path == "ranking_plugins.lightning":
        pytest.importorskip("lightning")
    module = importlib.import_module(path)
    assert callable(getattr(module, PUBLIC_PATHS[path]))


def test_the_code_tells_no_history() -> None:
    tagged = [
        f"{p.relative_to(PACKAGE)}:{i}"
        for p in sorted(PACKAGE.rglob("*.py"))
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\b[Ii]ssues? \d+", line)
    ]
    assert tagged == []


# -- the map of the tree, docs/contributing.rst ----------------------------------------

ROOT = PACKAGE.parent
CONTRIBUTING = ROOT / "docs" / "contributing.rst"

#: literals of the map that name a file or folder of the repository, by their prefix
REPOSITORY_FOLDERS = ("ranking_plugins/", "tests/", "docs/", "benchmarks/", ".ci/")


def _map_text() -> str:
    if not CONTRIBUTING.is_file():
        pytest.skip("docs/contributing.rst is not beside the package (an installed copy)")
    return CONTRIBUTING.read_text(encoding="utf-8")


def _module_file(module: str) -> Path | None:
    """The file of the package's module ``module`` (dotted), if there is one."""
    base = ROOT.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def test_every_path_the_map_names_exists() -> None:
    literals = set(re.findall(r"``([^`\s<>]+)``", _map_text()))
    named = {text for text in literals if text.endswith((".py", "/")) or "/" in text}
    assert any(text.startswith("ranking_plugins/kernel/") for text in named)
    # every file and folder of the package, folders spelled with their final "/"
    paths = [
        p.relative_to(ROOT).as_posix() + ("/" if p.is_dir() else "")
        for p in PACKAGE.rglob("*")
        if "__pycache__" not in p.parts
    ]
    missing = []
    for text in sorted(named):
        if text.startswith(REPOSITORY_FOLDERS):
            found = (ROOT / text).exists()
        else:  # a path within the package, short as the text around it allows
            found = any(p.endswith("/" + text) for p in paths)
        if not found:
            missing.append(text)
    assert missing == []


def test_every_module_of_the_tree_is_on_the_map() -> None:
    literals = set(re.findall(r"``([^`\s<>]+)``", _map_text()))
    absent = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if path.name == "__init__.py" and path.parent != PACKAGE:
            # a sub-package is on the map by its folder
            names = {relative, path.parent.relative_to(ROOT).as_posix() + "/"}
        else:
            names = {relative}
        if not names & literals:
            absent.append(relative)
    assert absent == []


def test_every_module_and_name_the_map_refers_to_exists() -> None:
    text = _map_text()
    modules = re.findall(r":mod:`(?:[^`<]*<)?~?([\w.]+)>?`", text)
    assert modules
    assert [m for m in modules if _module_file(m) is None] == []
    names = re.findall(r":(?:func|class|data|meth|attr):`(?:[^`<]*<)?~?([\w.]+)>?`", text)
    assert names
    unresolved = []
    for target in names:
        parts = target.split(".")
        owner = max(
            (i for i in range(1, len(parts)) if _module_file(".".join(parts[:i]))), default=0
        )
        if owner == 0:
            unresolved.append(target)
            continue
        try:
            value: object = importlib.import_module(".".join(parts[:owner]))
        except ImportError as error:  # an optional library this environment lacks
            pytest.skip(f"{target}: {error}")
        for part in parts[owner:]:
            value = getattr(value, part, None)
        if value is None:
            unresolved.append(target)
    assert unresolved == []
