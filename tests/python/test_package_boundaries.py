"""The layering of python/tandem, read from the sources' imports (ast; nothing is imported):

* ``tandem._core`` (the engine, gradients, options, the engine state's layout...) imports
  no front end: not tandem.torch, tandem.megatron, tandem.dcp nor tandem.planner;
* front ends never import each other, but for the pairs ALLOWED names (with the reason);
* only ``tandem._core`` and ``tandem.planner`` import the extension ``tandem._C`` (and the
  package's own ``__init__.py``, which exports its version and error classes): a front end
  reaches a binding function through ``tandem._core``;
* no class is spread over modules: no ``setattr(SomeClass, ...)`` nor ``SomeClass.x = ...``,
  and no class body that names a function of another of the package's modules as its
  own (``state_dict = _state.state_dict``)
  of a class of the package;
* no module imports one that imports it back (an import inside a function counts), and no
  file is over 600 lines.

An import of the package ``tandem`` itself is no step of a chain: Python runs its
``__init__.py`` before any of its modules. Run as a script, this file prints the import
depth: the longest chain of the package's modules each of which imports the next when it
is imported.
"""

import ast
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PACKAGE = os.path.join(ROOT, "python", "tandem")

CORE = "tandem._core"
FRONT_ENDS = ("tandem.torch", "tandem.megatron", "tandem.dcp", "tandem.planner")
EXTENSION = "tandem._C"
# tandem.megatron_fsdp is tandem.megatron.fsdp under the name it has always had.
ALIASES = {"tandem.megatron_fsdp": "tandem.megatron"}
# (importer's front end, imported front end): why the one needs the other.
ALLOWED = {
    ("tandem.planner", "tandem.torch"): "calibrate_binding measures tandem.torch's step",
}


def modules():
    """{dotted name: path} of every module of python/tandem."""
    found = {}
    for folder, _, files in os.walk(PACKAGE):
        for f in files:
            if not f.endswith(".py"):
                continue
            rel = os.path.relpath(os.path.join(folder, f), os.path.dirname(PACKAGE))
            parts = rel[:-3].split(os.sep)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = os.path.join(folder, f)
    return found


def _at_import_time(tree):
    """The nodes of `tree` that run when the module is imported (not in a function)."""
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        yield node
        todo.extend(ast.iter_child_nodes(node))


def _from(package, node):
    """The absolute name of the module a ``from ... import`` in `package` reads."""
    base = node.module or ""
    if node.level:
        up = package.split(".")[:len(package.split(".")) - node.level + 1]
        base = ".".join(up + ([base] if base else []))
    return base


def imports(name, path, known):
    """[(imported module, line, at import time)] of module `name`: the package's modules
    and the extension, whichever way they are spelled."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    eager = {id(n) for n in _at_import_time(tree)}
    out = []
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _from(package, node)
            for a in node.names:
                sub = base + "." + a.name
                targets.append(sub if sub in known or sub == EXTENSION else base)
        if (isinstance(node, ast.Attribute) and node.attr == "_C"
                and isinstance(node.value, ast.Name) and node.value.id == "tandem"):
            targets = [EXTENSION]  # tandem._C.f() after `import tandem`
        for t in targets:
            if t in known or t == EXTENSION:
                out.append((t, node.lineno, id(node) in eager))
    return out


def graph():
    known = modules()
    return {name: imports(name, path, known) for name, path in sorted(known.items())}


def part(name):
    """The part of the package module `name` belongs to: _core, a front end, the
    extension, or None (the package's __init__)."""
    name = ALIASES.get(name, name)
    for p in (CORE, EXTENSION) + FRONT_ENDS:
        if name == p or name.startswith(p + "."):
            return p
    return None


def violations():
    found = []
    for name, edges in graph().items():
        mine = part(name)
        for target, line, _ in edges:
            theirs = part(target)
            where = "%s:%d imports %s" % (name, line, target)
            if theirs == EXTENSION and mine not in (CORE, "tandem.planner", None):
                found.append(where + ": only _core and planner import the extension")
            elif mine == CORE and theirs in FRONT_ENDS:
                found.append(where + ": _core imports no front end")
            elif (mine in FRONT_ENDS and theirs in FRONT_ENDS and mine != theirs
                  and (mine, theirs) not in ALLOWED):
                found.append(where + ": front ends do not import each other")
    return found


def _package_classes():
    names = set()
    for path in modules().values():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        names.update(n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef))
    return names


def spread_classes():
    """Places that add an attribute to a class of the package from outside its body."""
    classes = _package_classes()
    found = []
    for name, path in sorted(modules().items()):
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id == "setattr" and node.args
                    and isinstance(node.args[0], ast.Name) and node.args[0].id in classes):
                found.append("%s:%d setattr(%s, ...)" % (name, node.lineno, node.args[0].id))
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                    if (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                            and t.value.id in classes
                            and not (t.attr.startswith("__") and t.attr.endswith("__"))):
                        found.append("%s:%d %s.%s = ..." % (name, node.lineno, t.value.id,
                                                            t.attr))
        found += borrowed_methods(name, tree, modules())
    return found


def borrowed_methods(name, tree, known):
    """Places in module `name` (its ast `tree`) where a class body binds a function of
    another of the package's modules (``x = module.f`` or ``x = f``, imported)."""
    aliases, functions = {}, {}  # local name -> package module; local name -> its module
    package = name if known.get(name, "").endswith("__init__.py") else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = _from(package, node)
            for a in node.names:
                if "%s.%s" % (base, a.name) in known:
                    aliases[a.asname or a.name] = "%s.%s" % (base, a.name)
                elif base in known:
                    functions[a.asname or a.name] = base
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name in known and a.asname:
                    aliases[a.asname] = a.name
    found = []
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for node in cls.body:
            value = getattr(node, "value", None)
            if not isinstance(node, (ast.Assign, ast.AnnAssign)) or value is None:
                continue
            if (isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name)
                    and value.value.id in aliases):
                where = aliases[value.value.id]
            elif isinstance(value, ast.Name) and value.id in functions:
                where = functions[value.id]
            else:
                continue
            if where != name:
                found.append("%s:%d class %s takes a method from %s" % (
                    name, node.lineno, cls.name, where))
    return found


def _steps(eager_only):
    """{module: [modules it imports]}: the package's modules but the package itself and
    the extension; with `eager_only`, only the imports that run at import time."""
    return {n: sorted({t for t, _, eager in e
                       if (eager or not eager_only) and t not in ("tandem", EXTENSION, n)})
            for n, e in graph().items()}


def longest_chain(eager_only=True):
    """The longest chain of modules each of which imports the next (at import time with
    `eager_only`); raises AssertionError on a cycle."""
    edges = _steps(eager_only)
    best = {}

    def walk(n, path):
        if n in path:
            raise AssertionError("import cycle: " + " -> ".join(path + (n,)))
        if n not in best:
            chains = [walk(t, path + (n,)) for t in edges.get(n, [])]
            best[n] = (n,) + max(chains, key=len, default=())
        return best[n]

    return max((walk(n, ()) for n in edges), key=len)


def test_core_front_ends_and_the_extension_keep_their_layers():
    found = violations()
    assert not found, "\n".join(found)


def test_no_class_is_spread_over_modules():
    found = spread_classes()
    assert not found, "\n".join(found)


def test_no_import_cycles_and_no_file_over_600_lines():
    longest_chain(eager_only=False)
    chain = longest_chain()
    print("import depth %d: %s" % (len(chain), " -> ".join(chain)))
    long = {name: n for name, path in modules().items()
            if (n := len(open(path, encoding="utf-8").read().splitlines())) > 600}
    assert not long, long


def test_the_checks_see_what_they_look_for():
    known = modules()
    assert "tandem._core.engine" in known and "tandem.torch" in known
    core = imports("tandem._core.engine", known["tandem._core.engine"], known)
    assert (EXTENSION, True) in {(t, eager) for t, _, eager in core}
    assert part("tandem.megatron_fsdp") == "tandem.megatron"
    assert part("tandem.torch._optimizer") == "tandem.torch" and part("tandem") is None
    borrowed = ast.parse("from tandem.torch import _state\nfrom tandem.torch._state import f\n"
                         "class A:\n    g = _state.g\n    f = f\n    n = 1\n")
    assert len(borrowed_methods("tandem.torch._optimizer", borrowed, known)) == 2
    dcp = imports("tandem.dcp", known["tandem.dcp"], known)
    assert ("tandem.dcp._metadata", True) in {(t, eager) for t, _, eager in dcp}


if __name__ == "__main__":
    found = violations() + spread_classes()
    for line in found:
        print(line)
    chain = longest_chain()
    print("%d modules; import depth %d: %s" % (len(modules()), len(chain), " -> ".join(chain)))
    sys.exit(1 if found else 0)
