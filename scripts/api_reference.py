"""Writes docs/reference/: the API reference pages mkdocstrings fills from the docstrings.

One page for the package (every name in `tpuestimator.__all__`) and one per public sub-package
(its docstring and the names of its `__all__`). Names are given by the module that defines them,
found statically with griffe (nothing is imported, so TensorFlow is not needed). Run it after
changing a public name; tests/python/test_docs.py fails while the pages are out of date.
Usage: python scripts/api_reference.py [--check]
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import griffe

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "docs" / "reference"
# The sub-packages whose names a user imports (each has an `__all__`), in the order of the guides.
SUBPACKAGES = ["data", "tables", "serving", "runs", "hooks", "debug", "porting"]
TITLES = {"data": "Data", "tables": "Tables", "serving": "Serving", "runs": "Runs", "hooks": "Hooks",
          "debug": "Debugging", "porting": "Porting"}


def _init_names(package: griffe.Module) -> tuple[list[str], dict[str, str]]:
    """`package.__all__` and its lazy map `_EXPORTS` (name -> defining module), read from the source:
    `__all__` is built from literal dicts and lists (`sorted(_EXPORTS)`, `[*_LAZY]`), evaluated
    here with those literals only."""
    tree = ast.parse(Path(package.filepath).read_text())
    literals: dict[str, object] = {}
    all_expr = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name == "__all__":
                all_expr = node.value
            else:
                try:
                    literals[name] = ast.literal_eval(node.value)
                except ValueError:
                    pass
    names = eval(compile(ast.Expression(all_expr), str(package.filepath), "eval"),  # noqa: S307 (our source)
                 {"__builtins__": {"sorted": sorted, "list": list}}, literals) if all_expr else []
    lazy = {**literals.get("_EXPORTS", {}), **literals.get("_LAZY", {})}  # type: ignore[dict-item]
    return [n for n in names if not n.startswith("_")], lazy


def _target(package: griffe.Module, name: str, lazy: dict[str, str]) -> str:
    """The dotted path of the object that defines `name`, one of `package`'s exports."""
    if name in lazy:
        module = lazy[name] if lazy[name].startswith("tpuestimator") else f"{package.path}.{lazy[name]}"
        return f"{module}.{name}"
    member = package.members[name]
    return member.target_path if member.is_alias else member.path


def pages() -> dict[str, str]:
    root = griffe.load("tpuestimator", search_paths=[str(REPO / "python")], resolve_aliases=False)
    out = {}
    body = ["# tpuestimator", "", "The names `import tpuestimator` gives (`tpuestimator.__all__`).", "",
            "::: tpuestimator", "    options:", "      members: false", "      show_root_heading: false", ""]
    seen: set[str] = set()   # each object documented once (autorefs needs one page per name)
    names, lazy = _init_names(root)
    # The Estimator and its RunConfig have a page of their own, the one TPUEstimator users look for.
    own = ["# Estimator and RunConfig", "", "`tpuestimator.Estimator`, TPUEstimator's successor, and its `RunConfig`.", ""]
    for name in ("Estimator", "RunConfig"):
        seen.add(_target(root, name, lazy))
        own += [f"::: {_target(root, name, lazy)}", "    options:", "      show_root_heading: true",
                "      show_root_full_path: false", ""]
    out["estimator.md"] = "\n".join(own)
    body += ["- [`Estimator`][tpuestimator.core.estimator.Estimator] and "
             "[`RunConfig`][tpuestimator.core.run_config.RunConfig]: [their own page](estimator.md)", ""]
    for name in names:
        if name in ("Estimator", "RunConfig"):
            continue
        seen.add(_target(root, name, lazy))
        body += [f"::: {_target(root, name, lazy)}", "    options:", "      show_root_heading: true", "      show_root_full_path: false", ""]
    out["tpuestimator.md"] = "\n".join(body)
    for sub in SUBPACKAGES:
        package = root.members[sub]
        body = [f"# {TITLES[sub]}: `tpuestimator.{sub}`", "", f"::: tpuestimator.{sub}", "    options:",
                "      members: false", "      show_root_heading: false", ""]
        names, lazy = _init_names(package)
        elsewhere = [f"- [`{name}`][{_target(package, name, lazy)}]" for name in names
                     if _target(package, name, lazy) in seen]
        if elsewhere:
            body += ["Also exported here, documented on another page:", "", *elsewhere, ""]
        for name in names:
            if _target(package, name, lazy) in seen:
                continue
            seen.add(_target(package, name, lazy))
            body += [f"::: {_target(package, name, lazy)}", "    options:", "      show_root_heading: true", "      show_root_full_path: false", ""]
        out[f"{sub}.md"] = "\n".join(body)
    index = ["# API reference", "",
             "Generated from the docstrings (`scripts/api_reference.py` writes these pages).", "",
             "- [Estimator and RunConfig](estimator.md)",
             "- [tpuestimator](tpuestimator.md): the package's other names, `run_job` among them"]
    index += [f"- [tpuestimator.{sub}]({sub}.md)" for sub in SUBPACKAGES]
    out["index.md"] = "\n".join(index) + "\n"
    return out


def main(argv: list[str]) -> int:
    wanted = pages()
    if "--check" in argv:
        stale = [n for n, t in wanted.items() if not (OUT / n).is_file() or (OUT / n).read_text() != t]
        extra = sorted(p.name for p in OUT.glob("*.md") if p.name not in wanted)
        if stale or extra:
            print(f"docs/reference is out of date (stale: {stale}, not generated: {extra}): "
                  "run python scripts/api_reference.py", file=sys.stderr)
            return 1
        return 0
    OUT.mkdir(parents=True, exist_ok=True)
    for name, text in wanted.items():
        (OUT / name).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
