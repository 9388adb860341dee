"""Architecture rules of python/tpuestimator, checked by reading the source (no imports).

- No import cycles between modules, counting imports inside functions: a cycle hidden in a
  function body is still a cycle (it only fails later, and in a harder-to-read way).
- No private name (`_x`) imported from another module: what a module shares is public.
"""
from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "tpuestimator"
BRIDGE = Path(__file__).resolve().parents[2] / "inst" / "python" / "tpuestimatorr_bridge"  # the R package's Python



@functools.cache
def _tree(path: Path) -> ast.Module:
    """A source file's syntax tree, parsed once per process: each rule below walks every module
    (read-only; parsing them again for each rule was most of this file's time)."""
    return ast.parse(path.read_text(), filename=str(path))


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _module_named_by_string(text: object, modules: dict[str, Path]) -> str | None:
    """The project module a string names: `"tpuestimator.debug.dumps"`, the module of a
    `"tpuestimator.models.cnn:cnn"` target, or the module holding a dotted name inside it."""
    if not isinstance(text, str) or not text.startswith("tpuestimator") or " " in text:
        return None
    text = text.partition(":")[0].rstrip(".")
    while text and text not in modules:  # a name inside a module
        text = text.rpartition(".")[0]
    return text or None


# The calls that import (or find, or run) a module named by a value: `importlib.import_module`,
# `__import__`, `importlib.util.find_spec` / `spec_from_file_location`, `runpy.run_module` / `run_path`.
IMPORT_CALLS = {"import_module", "__import__", "find_spec", "spec_from_file_location", "run_module", "run_path"}

# The only functions that import by a string, and why; every other import of a project module is
# an import statement, which the layer and cycle checks read. A lazy loader imports only its own
# package's modules, named in a literal table whose values are its edges (the f-string head of its
# call + each value); so is the CLI's registry. None loads a project module outside its package.
STRING_IMPORT_LOADERS = {
    # `import tpuestimator` without TensorFlow (R's library() and `tpuestimator --help` stay fast)
    ("tpuestimator", "__getattr__"): ("_EXPORTS", "tpuestimator"),
    # each sub-package's names on first use, without importing TensorFlow when the package is imported
    ("tpuestimator.data", "__getattr__"): ("_EXPORTS", "tpuestimator.data"),
    ("tpuestimator.debug", "__getattr__"): ("_EXPORTS", "tpuestimator.debug"),
    ("tpuestimator.hooks", "__getattr__"): ("_LAZY", "tpuestimator.hooks"),
    ("tpuestimator.porting", "__getattr__"): ("_EXPORTS", "tpuestimator.porting"),
    ("tpuestimator.tables", "__getattr__"): ("_EXPORTS", "tpuestimator.tables"),
    # the plugin loader of `model: name | module:function`: a built-in model, or the user's module
    ("tpuestimator.models", "resolve_model_fn"): ("BUILTIN", "tpuestimator.models"),
    # the CLI's command registry: one module per command, each imported to add its sub-parser
    ("tpuestimator.cli", "build_parser"): ("COMMAND_MODULES", "tpuestimator.commands"),
    # where `tpuestimator check` finds a `module:function` model's source file (the user's module)
    ("tpuestimator.porting.tf1_leftovers", "model_module_path"): (None, None),
}


def _call_name(node: ast.Call) -> str | None:
    return node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)


def _string_import_calls(tree: ast.AST) -> list[tuple[ast.Call, str | None]]:
    """Each call of `IMPORT_CALLS` with an argument, with the function it is in (innermost)."""
    where: dict[int, str] = {}
    for func in ast.walk(tree):
        if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(func):
                where[id(node)] = func.name
    return [(node, where.get(id(node))) for node in ast.walk(tree)
            if isinstance(node, ast.Call) and node.args and _call_name(node) in IMPORT_CALLS]


def _literal_tables(tree: ast.AST) -> dict[str, list]:
    """`NAME = {...}` / `(...)` / `[...]` at a module's top: the dict's values or the sequence's items."""
    out = {}
    for node in getattr(tree, "body", []):
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        items = value.values if isinstance(value, ast.Dict) else \
            value.elts if isinstance(value, (ast.Tuple, ast.List)) else None
        for target in targets:
            if isinstance(target, ast.Name) and items is not None:
                out[target.id] = [i.value for i in items if isinstance(i, ast.Constant)]
    return out


def _string_imports(module: str, tree: ast.AST, modules: dict[str, Path]) -> tuple[set[str], list[str]]:
    """(the project modules `module` imports by string, the string imports that break the rule).

    In a `STRING_IMPORT_LOADERS` function, the edges are its table's values (after the f-string
    head of the call, when it has one): each must be a module of the loader's package. Anywhere
    else an import call may only name a module outside the project by a literal string
    (`find_spec("tensorboard")`): a project module, or a name known only at run time, breaks it."""
    tables = _literal_tables(tree)
    edges: set[str] = set()
    offences = []
    for call, function in _string_import_calls(tree):
        arg = call.args[0]
        spelled = f"{module}:{call.lineno} {ast.unparse(call)}"
        loader = STRING_IMPORT_LOADERS.get((module, function))
        if loader is None:
            if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)) \
                    or arg.value == "tpuestimator" or _module_named_by_string(arg.value, modules):
                offences.append(f"{spelled}: a string import outside STRING_IMPORT_LOADERS (use an import statement)")
            continue
        table, package = loader
        if table is None:
            continue
        head = ""
        if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
            head = str(arg.values[0].value)
        if table not in tables:
            offences.append(f"{spelled}: its table {table} is no literal at the module's top")
            continue
        for value in tables[table]:
            named = f"{head}{value}".partition(":")[0]
            if named not in modules:
                offences.append(f"{spelled}: {table} names {named!r}, no module of the project")
                continue
            edges.add(named)  # an edge wherever it points: the layer and cycle checks read it too
            if named != package and not named.startswith(package + "."):
                offences.append(f"{spelled}: {table} names {named}, outside {package} (import it by statement)")
    return edges, offences


def _imports(modules: dict[str, Path]):
    """{module: {(imported module, imported name or None)}} for every import in the file."""
    out: dict[str, set[tuple[str, str | None]]] = {}
    for name, path in modules.items():
        found: set[tuple[str, str | None]] = set()
        tree = _tree(path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    found.add((alias.name, None))
            elif isinstance(node, ast.ImportFrom):
                target = _resolve(name, path.name == "__init__.py", node)
                for alias in node.names:
                    if f"{target}.{alias.name}" in modules:  # `from pkg import submodule`
                        found.add((f"{target}.{alias.name}", None))
                    else:
                        found.add((target, alias.name))
        found.update((named, None) for named in _string_imports(name, tree, modules)[0])
        out[name] = found
    return out


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, imported in _imports(modules).items():
        edges = set()
        for target, _ in imported:
            if target in modules and target != name:
                edges.add(target)
        graph[name] = edges
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[set[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _is_package_parent(a: str, b: str) -> bool:
    return b.startswith(a + ".") or a.startswith(b + ".")


def test_no_import_cycles():
    graph = _graph()
    # A package's __init__ re-exporting its own submodules is not a cycle of concepts, but a
    # submodule importing its package's __init__ back is: drop only the parent->child edges.
    graph = {m: {t for t in ts if not t.startswith(m + ".")} for m, ts in graph.items()}
    cycles = list(_cycles(graph))
    assert not cycles, "import cycles in python/tpuestimator: " + "; ".join(
        " <-> ".join(sorted(c)) for c in cycles)


def test_cycle_finder_finds_a_cycle_inside_functions(tmp_path):
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [{"a", "b", "c"}]


def test_no_private_names_imported_across_modules():
    modules = _modules()
    offenders = []
    for name, imported in _imports(modules).items():
        for target, attr in imported:
            if target.startswith("tpuestimator") and attr and attr.startswith("_") and not attr.startswith("__"):
                offenders.append(f"{name} imports {target}.{attr}")
    assert not offenders, "private names imported across modules: " + "; ".join(sorted(offenders))


@pytest.mark.quick("schema")
def test_config_defaults_have_one_source_the_schema():
    import dataclasses
    import json

    from tpuestimator.config import DEFAULTS, schema_defaults
    from tpuestimator.core.run_config import RunConfig
    from tpuestimator.data.spec import _SECTION_DEFAULTS  # noqa: PLC2701  (the test reads the module's table)

    schema = json.loads((PACKAGE / "schema" / "config.schema.json").read_text())
    assert DEFAULTS == schema_defaults(schema)
    assert _SECTION_DEFAULTS is DEFAULTS["data"]
    for field in dataclasses.fields(RunConfig):
        key = field.metadata.get("config")
        if key:
            section, name = key.split(".")
            assert field.default == DEFAULTS[section][name], field.name
    assert {f.name for f in dataclasses.fields(RunConfig) if not f.metadata.get("config")} == {"model_dir"}


# The modules that read a config dict by key: the loader, the rules across its fields and the
# flags' mapping onto fields (they run on the dict, before the typed views exist).
CONFIG_MODULES = {PACKAGE / "config.py", PACKAGE / "config_rules.py", PACKAGE / "config_flags.py"}


# The layers, bottom up, by package (docs/ARCHITECTURE.md): a module imports only from its own
# layer or those below it. Each sub-package's docstring says the same in words.
LAYERS = (
    ("errors", "config", "config_rules", "config_sections", "config_views", "config_flags", "manifest", "schema", "spec", "models",
     "system"),  # contracts: what every layer shares
    ("core",),  # the Estimator, its loops and state
    ("data", "examples"),  # input pipelines, writers, the bundled examples
    ("runs",),  # run records in tfruns's format, TensorBoard
    ("hooks",),  # the built-in hooks
    ("debug",),  # NaN reports, replay, dumps
    ("serving", "porting"),  # what is done with an export; the TPUEstimator adapters
    ("jobs", "tables"),  # config -> results: train, evaluate, export, tune; tables in, canned models out
    ("cluster",),  # local clusters, Kubernetes, the side-car evaluator
    ("commands", "cli", "__main__"),  # the CLI
)


def layer_of(module: str) -> int | None:
    """The layer index of `tpuestimator.<package>...`; None for the package root (it re-exports)."""
    parts = module.split(".")
    if len(parts) < 2:
        return None
    for index, packages in enumerate(LAYERS):
        if parts[1] in packages:
            return index
    raise AssertionError(f"{module} is in no layer of LAYERS: add its package there and to docs/ARCHITECTURE.md")


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    out = []
    for module, targets in graph.items():
        mine = layer_of(module)
        for target in sorted(targets):
            theirs = layer_of(target) if target.startswith("tpuestimator") else None
            if mine is not None and theirs is not None and theirs > mine:
                out.append(f"{module} (layer {'/'.join(LAYERS[mine])}) imports {target} "
                           f"(layer {'/'.join(LAYERS[theirs])}, above it)")
    return out


def test_every_module_imports_only_its_layer_and_those_below():
    """A core module importing serving, a job importing the CLI, ...: each fails here."""
    offenders = layer_violations(_graph())
    assert not offenders, offenders


def test_layer_rule_catches_an_upward_import():
    graph = {"tpuestimator.core.estimator": {"tpuestimator.serving.exports", "tpuestimator.spec"},
             "tpuestimator.serving.exports": {"tpuestimator.core.signatures"}}
    assert layer_violations(graph) == [
        "tpuestimator.core.estimator (layer core) imports tpuestimator.serving.exports (layer serving/porting, above it)"]


def test_string_imports_count_as_imports():
    modules = {m: Path("x.py") for m in ("tpuestimator.hooks", "tpuestimator.hooks.watch", "tpuestimator.debug",
                                         "tpuestimator.debug.dumps", "tpuestimator.commands", "tpuestimator.commands.train",
                                         "tpuestimator.cli")}
    lazy = ast.parse('_LAZY = {"WatchHook": "tpuestimator.hooks.watch", "DumpHook": "tpuestimator.debug.dumps"}\n'
                     'created_by = "tpuestimator.hooks"\n'  # a value, not an import
                     'def __getattr__(name):\n    return importlib.import_module(_LAZY[name])\n')
    edges, offences = _string_imports("tpuestimator.hooks", lazy, modules)
    assert edges == {"tpuestimator.hooks.watch", "tpuestimator.debug.dumps"}
    assert offences == ["tpuestimator.hooks:4 importlib.import_module(_LAZY[name]): _LAZY names "
                        "tpuestimator.debug.dumps, outside tpuestimator.hooks (import it by statement)"]
    assert layer_violations({"tpuestimator.hooks": edges}) == [
        "tpuestimator.hooks (layer hooks) imports tpuestimator.debug.dumps (layer debug, above it)"]
    registry = ast.parse('COMMAND_MODULES = ("train",)\n'
                         'def build_parser():\n    import_module(f"tpuestimator.commands.{name}")\n')
    assert _string_imports("tpuestimator.cli", registry, modules) == ({"tpuestimator.commands.train"}, [])


def test_string_imports_are_only_in_the_listed_loaders():
    """`import_module`, `__import__`, `find_spec`, ... of a project module (or of a name known only
    at run time) outside `STRING_IMPORT_LOADERS` fails: such an import hides an edge from the layer
    and cycle checks. Each listed loader still exists and imports by string."""
    modules = _modules()
    offences, seen = [], set()
    for name, path in modules.items():
        tree = _tree(path)
        offences += _string_imports(name, tree, modules)[1]
        seen.update((name, function) for _, function in _string_import_calls(tree))
    assert not offences, offences
    assert set(STRING_IMPORT_LOADERS) <= seen, f"listed loaders that import nothing by string: " \
        f"{sorted(set(STRING_IMPORT_LOADERS) - seen)}"


def test_a_string_import_outside_the_loaders_is_found():
    modules = {"tpuestimator.jobs.job": Path("x.py"), "tpuestimator.serving.exports": Path("y.py"),
               "tpuestimator": Path("z.py")}
    code = ('import importlib\n'
            'def run(kind):\n'
            '    a = importlib.import_module("tpuestimator.serving.exports")\n'
            '    b = __import__("tpuestimator.serving.exports:export_model")\n'
            '    c = importlib.util.find_spec(kind)\n'  # known only at run time
            '    d = importlib.util.find_spec("tensorboard")\n'  # not the project's: fine
            '    e = importlib.import_module("json")\n')
    _, offences = _string_imports("tpuestimator.jobs.job", ast.parse(code), modules)
    assert [o.split(" ")[0] for o in offences] == ["tpuestimator.jobs.job:3", "tpuestimator.jobs.job:4",
                                                   "tpuestimator.jobs.job:5"]


def test_every_sub_package_says_what_it_holds_and_may_import():
    for init in sorted(PACKAGE.glob("*/__init__.py")):
        doc = ast.get_docstring(_tree(init)) or ""
        assert len(doc) > 60, f"{init.parent.name}/__init__.py needs a docstring: what it holds, what it may import"
        layer_of(f"tpuestimator.{init.parent.name}")


# Private attributes of other libraries that a module must patch, with the reason at the use.
PRIVATE_ATTRIBUTE_EXCEPTIONS = {
    # the Keras 3 fix for TF's async checkpoint (checkpointing.keras_async_checkpoint_fix)
    ("tpuestimator.core.checkpointing", "_copy_trackable_to_cpu"),
    # per-device input datasets without autotuning (workarounds.fast_multi_device_iterator_teardown)
    ("tpuestimator.core.workarounds", "_create_device_dataset"),
    # a ps/worker task's exit: a tf.distribute.Server cannot be stopped (cluster.tasks.serve)
    ("tpuestimator.commands.train", "_exit"),
    # `data serve` leaving when its servers' stop hangs (commands.data.stop_service)
    ("tpuestimator.commands.data", "_exit"),
}


def test_no_private_attributes_of_other_objects():
    """Modules use what other objects make public (`estimator.state`, `estimator.train_input`,
    ...), never `other._x`; only `self._x` / `cls._x`."""
    offenders = []
    for name, path in _modules().items():
        tree = _tree(path)
        # An object a classmethod made with `x = cls(...)` is the class's own: x._y is fine.
        own = {t.id for node in ast.walk(tree) if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
               and isinstance(node.value.func, ast.Name) and node.value.func.id == "cls"
               for t in node.targets if isinstance(t, ast.Name)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls", *own):
                    continue
                if (name, node.attr) not in PRIVATE_ATTRIBUTE_EXCEPTIONS:
                    offenders.append(f"{name}:{node.lineno} {ast.unparse(node)}")
    assert not offenders, offenders


MAX_MODULE_LINES = 400


def modules_over(limit: int, modules: dict[str, Path]) -> list[str]:
    """The modules longer than `limit` lines, with their length."""
    out = []
    for name, path in modules.items():
        lines = path.read_text().count("\n")
        if lines > limit:
            out.append(f"{name} ({lines} lines)")
    return out


def test_every_module_is_at_most_400_lines():
    """One job per module, read in one sitting (docs/ARCHITECTURE.md): a module over 400 lines
    is split by job, never excused. The R package's too: its Python bridge to the core and its R files."""
    bridge = {f"tpuestimatorr_bridge/{p.name}": p for p in sorted(BRIDGE.glob("*.py"))}
    r_files = {f"R/{p.name}": p for p in sorted((BRIDGE.parents[2] / "R").glob("*.R"))}
    assert len(bridge) >= 3 and len(r_files) >= 10, f"the R package's modules are not under {BRIDGE.parents[2]}"
    offenders = modules_over(MAX_MODULE_LINES, {**_modules(), **bridge, **r_files})
    assert not offenders, f"modules over {MAX_MODULE_LINES} lines (split them by job): {offenders}"


def test_line_limit_counts_every_line(tmp_path):
    (tmp_path / "short.py").write_text("x = 1\n" * 400)
    (tmp_path / "long.py").write_text('"""A docstring saying why."""\n' + "x = 1\n" * 400)
    modules = {"short": tmp_path / "short.py", "long": tmp_path / "long.py"}
    assert modules_over(400, modules) == ["long (401 lines)"]


def test_autograph_is_skipped_through_one_name():
    """`tf.autograph.experimental.do_not_convert` is spelled once, in `system/graph_code.py`
    (`as_written`): the data and model layers import that name, never a second alias of their own."""
    offenders = []
    for name, path in _modules().items():
        if name == "tpuestimator.system.graph_code":
            continue
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Attribute) and node.attr == "do_not_convert":
                offenders.append(f"{name}:{node.lineno} {ast.unparse(node)}")
    assert not offenders, "use tpuestimator.system.graph_code.as_written: " + "; ".join(offenders)


def test_the_export_metadata_has_one_reader():
    """`assets.extra/tpuestimator.json` is read and written by `serving/export_info.py` alone
    (`ExportInfo`, `read_export_info`); the others take its typed fields: no module (nor the R
    bridge) joins `EXPORT_META` into a path of its own."""
    offenders = []
    bridge = PACKAGE.parents[1] / "inst" / "python"
    for path in [*sorted(PACKAGE.rglob("*.py")), *sorted(bridge.rglob("*.py"))]:
        if path == PACKAGE / "serving" / "export_info.py":
            continue
        for node in ast.walk(_tree(path)):
            args = []
            if isinstance(node, ast.Call):
                args = node.args
            elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
                args = [node.left, node.right]
            if any(isinstance(a, ast.Name) and a.id == "EXPORT_META" or
                   isinstance(a, ast.Constant) and a.value == "tpuestimator.json" for a in args):
                offenders.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
    assert not offenders, "read the export metadata with serving.export_info.read_export_info: " + "; ".join(offenders)


def _config_lookups(tree: ast.AST) -> list[ast.Subscript]:
    """`x.raw["train"]` and `raw["train"]["max_steps"]`: a config field spelled as a string key."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Subscript):
            continue
        base = node.value
        if isinstance(base, ast.Attribute) and base.attr == "raw":
            found.append(node)
        elif (isinstance(base, ast.Subscript) and isinstance(base.value, (ast.Name, ast.Attribute))
              and getattr(base.value, "id", getattr(base.value, "attr", None)) == "raw"):
            found.append(node)
    return found


def test_config_fields_are_read_through_the_typed_section_views():
    """Outside `CONFIG_MODULES` a field is read as `cfg.train.max_steps` (the section views generated
    from the schema), never as `cfg.raw["train"]["max_steps"]`: one spelling, checked names."""
    offenders = []
    bridge = PACKAGE.parents[1] / "inst" / "python"
    files = [p for p in sorted(PACKAGE.rglob("*.py")) if p not in CONFIG_MODULES] + sorted(bridge.rglob("*.py"))
    for path in files:
        for node in _config_lookups(_tree(path)):
            offenders.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
    assert not offenders, "config fields looked up by string (use cfg.<section>.<field>): " + "; ".join(offenders)


def test_the_raw_config_is_read_by_the_config_modules_alone():
    """`cfg.raw` (the loaded dict) is read in `CONFIG_MODULES` only: elsewhere a field is a typed
    view's attribute (`cfg.name`, `cfg.data.format`), a whole dict where one must go is
    `cfg.to_dict()` (a file, R), and a field named at run time (a flag) is `cfg.value_at(path)`.
    `cfg.raw.get("name")` and `cfg.to_dict()["data"]` read a field past the views."""
    offenders = []
    bridge = PACKAGE.parents[1] / "inst" / "python"
    files = [p for p in sorted(PACKAGE.rglob("*.py")) if p not in CONFIG_MODULES] + sorted(bridge.rglob("*.py"))
    for path in files:
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Attribute) and node.attr == "raw":
                offenders.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
            elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Call) \
                    and _call_name(node.value) == "to_dict" and isinstance(node.slice, ast.Constant):
                offenders.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
    assert not offenders, "the config read past its typed views: " + "; ".join(offenders)


def test_config_lookup_finder_finds_string_lookups():
    code = 'a = cfg.raw["run"]["seed"]\nraw = cfg.raw\nb = raw["train"]["steps"]\nc = cfg.train.steps\n'
    assert sorted(node.lineno for node in _config_lookups(ast.parse(code))) == [1, 1, 3]


def test_section_views_declare_exactly_the_schema_fields():
    import dataclasses
    import json

    import pytest

    from tpuestimator.config import load_config

    schema = json.loads((PACKAGE / "schema" / "config.schema.json").read_text())
    cfg = load_config({"model": "linear", "data": {"format": "mnist", "train": "/data/train-*",
                                                   "image": {"height": 28, "width": 28, "channels": 1}}},
                      ["train.max_steps=7", "run.precision=mixed_bfloat16"])
    for section in ("data", "train", "eval", "predict", "export", "run", "debug"):
        view = getattr(cfg, section)
        assert [f.name for f in dataclasses.fields(view)] == list(schema["properties"][section]["properties"])
    assert cfg.train.max_steps == 7 and cfg.run.precision == "mixed_bfloat16"
    assert cfg.train.batch_size == schema["properties"]["train"]["properties"]["batch_size"]["default"]
    assert cfg.data.manifest is None and cfg.data.train == "/data/train-*"
    with pytest.raises(AttributeError, match="max_step"):
        _ = cfg.train.max_step  # a misspelt field fails loudly instead of reading None
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.train.max_steps = 3


@pytest.mark.quick("commands")
def test_every_command_module_is_registered_and_imports():
    """A command module missing from `cli.COMMAND_MODULES`, a name there with no module, or a
    module that fails to import: each fails here (the CLI used to skip such a command quietly)."""
    from tpuestimator import cli

    on_disk = {p.stem for p in (PACKAGE / "commands").glob("*.py") if p.stem != "__init__"}
    assert set(cli.COMMAND_MODULES) == on_disk
    parser = cli.build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command")  # noqa: SLF001 - argparse has no public list
    assert set(on_disk) <= set(subparsers.choices)


def test_a_command_module_that_cannot_be_imported_fails_the_parser(monkeypatch):
    import pytest

    from tpuestimator import cli

    monkeypatch.setattr(cli, "COMMAND_MODULES", (*cli.COMMAND_MODULES, "nosuch"))
    with pytest.raises(ModuleNotFoundError, match="tpuestimator.commands.nosuch"):
        cli.build_parser()


# Where a data section (a dict: a user's, an export's metadata) is parsed into the typed
# `data.spec.DataSpec`: the one function that reads it by key.
SECTION_PARSERS = {("data/spec.py", "_resolve")}  # behind `resolve_section`, which keeps its result
# The schema's defaults, read by name where a typed field declares its default.
DEFAULT_TABLES = {"DEFAULTS", "_SECTION_DEFAULTS", "_SCHEMA_DEFAULTS"}


def _section_key_reads(tree: ast.AST) -> list[tuple[ast.AST, str | None]]:
    """A config section's field read by string key: `section["label"]`, `data_section.get("format")`,
    `sec.setdefault("train", ...)` on a name holding "section", and `cfg.section("data")`; each with
    the function it is in."""
    where: dict[int, str] = {}
    for func in ast.walk(tree):
        if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(func):
                where[id(node)] = func.name
    found = []
    for node in ast.walk(tree):
        base = key = None
        if isinstance(node, ast.Subscript):
            base, key = node.value, node.slice
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "section":
                found.append((node, where.get(id(node))))
                continue
            if node.func.attr in ("get", "setdefault", "pop") and node.args:
                base, key = node.func.value, node.args[0]
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            continue
        name = getattr(base, "id", getattr(base, "attr", None))
        if name and "section" in name.lower() and name not in DEFAULT_TABLES:
            found.append((node, where.get(id(node))))
    return found


def test_config_sections_are_passed_typed():
    """Config sections travel as typed objects: the config's views (`cfg.data`, `cfg.debug`) and the
    data layer's `DataSpec`, whose fields are attributes; a section is never read by string key
    (`section["label"]`, `cfg.section("data")`) outside `CONFIG_MODULES` and the one parser
    (`data.spec.resolve_section`). The resolved facts (the manifest's folder and splits, a
    table's raw values) are named fields, never private keys (`"_dir"`) in a section dict."""
    offenders = []
    bridge = PACKAGE.parents[1] / "inst" / "python"
    files = [p for p in sorted(PACKAGE.rglob("*.py")) if p not in CONFIG_MODULES] + sorted(bridge.rglob("*.py"))
    for path in files:
        rel = path.relative_to(PACKAGE).as_posix() if PACKAGE in path.parents else path.name
        for node, function in _section_key_reads(_tree(path)):
            if (rel, function) not in SECTION_PARSERS:
                offenders.append(f"{rel}:{node.lineno} {ast.unparse(node)}")
    for path in sorted((PACKAGE / "data").rglob("*.py")):
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Constant) and node.value in ("_dir", "_table_raw", "_resolved_manifest",
                                                                 "_num_classes"):
                offenders.append(f"data/{path.name}:{node.lineno} private key {node.value!r}")
    assert not offenders, "config sections read by string key (pass the typed view / DataSpec): " + "; ".join(offenders)


def test_section_key_finder_finds_string_lookups():
    code = ('a = section["label"]\nb = data_section.get("format")\nc = cfg.section("data")\nd = spec.label\n'
            'e = row["run_dir"]\nf = _SECTION_DEFAULTS["cache"]\n')
    assert sorted(node.lineno for node, _ in _section_key_reads(ast.parse(code))) == [1, 2, 3]


def test_data_spec_defaults_are_the_schema_defaults():
    import dataclasses

    from tpuestimator.config import DEFAULTS
    from tpuestimator.data.spec import Assertion, Augment, DataSpec

    typed = {"augment": lambda v: Augment(**v), "assertions": lambda v: tuple(Assertion(**a) for a in v)}
    for field in dataclasses.fields(DataSpec):
        if field.name in DEFAULTS["data"]:
            default = field.default if field.default is not dataclasses.MISSING else field.default_factory()
            assert default == typed.get(field.name, lambda v: v)(DEFAULTS["data"][field.name]), field.name


# Where a model's params dict is parsed into the typed params (`DataParams`, the canned models'
# `LinearParams`, `DNNParams`, `WideAndDeepParams`), and the data's facts merged into it.
PARAMS_PARSER = PACKAGE / "models" / "params.py"


def _typed_param_keys() -> set[str]:
    """The keys the typed params hold that no other built-in model shares: the data's facts and
    the canned models' own settings (`optimizer`, `dropout`, ... are also the plain `tabular`,
    `cnn` and `image_classifier` models' params, and the run properties' of any model)."""
    import dataclasses

    from tpuestimator.models.params import DataParams, LinearParams, WideAndDeepParams

    keys = {f.name for cls in (DataParams, LinearParams, WideAndDeepParams) for f in dataclasses.fields(cls)}
    return keys - {"optimizer", "learning_rate", "hidden_units", "dropout", "batch_norm", "loss"}


def _param_key_reads(tree: ast.AST, keys: set[str]) -> list[ast.AST]:
    """`params["num_classes"]`, `estimator.params.get("task")`: a typed param read by string key
    from a name holding "params" (a write, `params["num_classes"] = n`, builds a dict)."""
    found = []
    for node in ast.walk(tree):
        base = key = None
        if isinstance(node, ast.Subscript) and not isinstance(node.ctx, ast.Store):
            base, key = node.value, node.slice
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args \
                and node.func.attr in ("get", "setdefault", "pop"):
            base, key = node.func.value, node.args[0]
        name = getattr(base, "id", getattr(base, "attr", None))
        if isinstance(key, ast.Constant) and key.value in keys and name and "params" in name.lower():
            found.append(node)
    return found


def test_the_built_in_models_params_are_read_typed():
    """The data's facts in a model's params (`task`, `num_classes`, `vocabulary`, a table's
    `feature_columns` and `label_stats`) and the canned models' settings are read by attribute
    (`DataParams.from_params(params).num_classes`, `LinearParams.from_params(params)`) outside
    `models/params.py`, the one parser; a user's model function still gets the plain dict."""
    keys = _typed_param_keys()
    offenders = []
    bridge = PACKAGE.parents[1] / "inst" / "python"
    for path in [*sorted(PACKAGE.rglob("*.py")), *sorted(bridge.rglob("*.py"))]:
        if path == PARAMS_PARSER:
            continue
        for node in _param_key_reads(_tree(path), keys):
            offenders.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
    assert not offenders, "typed params read by string key (parse them with models.params): " + "; ".join(offenders)


def test_param_key_finder_finds_string_lookups():
    code = ('a = params["num_classes"]\nb = estimator.params.get("task")\nparams["num_classes"] = 3\n'
            'c = params.get("filters")\nd = spec.params\ne = section["vocabulary"]\nf = params.get("label_stats")\n')
    assert [n.lineno for n in _param_key_reads(ast.parse(code), _typed_param_keys())] == [1, 2, 7]


# The fields of the typed views of a config's nested objects (`config_views`), of a table's
# columns (`models.column_spec.ColumnSpec`) and of a `RunConfig`'s devices (`core.devices.make_strategy`).
def _view_keys() -> set[str]:
    import dataclasses

    from tpuestimator.config_views import NESTED_VIEWS
    from tpuestimator.models.column_spec import ColumnSpec

    keys = {f.name for view in (*NESTED_VIEWS.values(), ColumnSpec) for f in dataclasses.fields(view)}
    return keys | {"strategy", "num_cpu_devices", "tpu", "zone", "project", "ps_partition"}


# The names that hold one of those views where it is read (`dump["dir"]`, `c.get("missing")`,
# `run.get("tpu")`, `columns[n]["type"]`).
VIEW_HOLDERS = re.compile(r"^(c|col|column|dump|watch|es|early_stopping|partition|ps_partition|run|run_section)$")
# Where a table's column is still its manifest dict: the functions that build and check that
# dict before the manifest is written (what users read and edit); readers get `ColumnSpec`s.
COLUMN_DICT_BUILDERS = {("models/feature_columns.py", "_with_encoding"), ("models/feature_columns.py", "validate_column"),
                        ("tables/write.py", "infer_feature_columns")}


def _view_key_reads(tree: ast.AST, keys: set[str]) -> list[tuple[ast.AST, str | None]]:
    """A typed view's field read by string key from a name that holds one; with its function."""
    where: dict[int, str] = {}
    for func in ast.walk(tree):
        if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(func):
                where[id(node)] = func.name

    def holds_view(base) -> bool:
        if isinstance(base, ast.Subscript):  # columns[name]["type"]
            return getattr(base.value, "id", getattr(base.value, "attr", None)) in ("columns", "inferred")
        name = getattr(base, "id", getattr(base, "attr", None))
        return bool(name and VIEW_HOLDERS.match(name))

    found = []
    for node in ast.walk(tree):
        base = key = None
        if isinstance(node, ast.Subscript):
            base, key = node.value, node.slice
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args \
                and node.func.attr in ("get", "setdefault", "pop"):
            base, key = node.func.value, node.args[0]
        if isinstance(key, ast.Constant) and key.value in keys and holds_view(base):
            found.append((node, where.get(id(node))))
    return found


def test_nested_config_objects_columns_and_devices_are_read_typed():
    """`debug.dump`, `debug.watch`, `eval.early_stopping`, `run.ps_partition` are parsed once into
    their `config_views` when the config is loaded, a table's columns into `ColumnSpec`s when the
    data section is resolved, and `make_strategy` takes the `RunConfig`: none of them is read by
    string key (`dump["dir"]`, `c["type"]`, `run.get("tpu")`) outside `CONFIG_MODULES` and the builders
    of the manifest's column dicts."""
    keys = _view_keys()
    offenders = []
    bridge = PACKAGE.parents[1] / "inst" / "python"
    files = [p for p in sorted(PACKAGE.rglob("*.py")) if p not in CONFIG_MODULES] + sorted(bridge.rglob("*.py"))
    for path in files:
        rel = path.relative_to(PACKAGE).as_posix() if PACKAGE in path.parents else path.name
        for node, function in _view_key_reads(_tree(path), keys):
            if (rel, function) not in COLUMN_DICT_BUILDERS:
                offenders.append(f"{rel}:{node.lineno} {ast.unparse(node)}")
    assert not offenders, "typed views read by string key (read the attribute): " + "; ".join(offenders)


def test_view_key_finder_finds_string_lookups():
    code = ('a = dump["dir"]\nb = watch.get("first_n")\nc["type"]\nd = columns[n]["type"]\ne = run.get("tpu")\n'
            'f = partition.get("max_shards")\ng = params["vocabulary"]\nh = c.type\ni = manifest["format"]\n'
            'j = es["metric"]\n')
    assert sorted(node.lineno for node, _ in _view_key_reads(ast.parse(code), _view_keys())) == [1, 2, 3, 4, 5, 6, 10]
