"""What ``docs/contributing.rst`` says about the tree, checked on the source."""

from __future__ import annotations

import ast
from pathlib import Path

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
