"""No two modules of mlcheck import each other, directly or through others (issue 21): a module
reads top to bottom on its own, and none depends on the order the others are loaded in.

Every import counts, at module level or inside a function: one deferred to call time is a loop
all the same. Nor do two packages (issue 40): a module of judging importing figures while one of
figures imports judging is no loop of modules, yet neither package can be read, tested or moved
without the other; the packages stand in floors, each importing only those below it.
"""

import ast
import pathlib

import mlcheck

ROOT = pathlib.Path(mlcheck.__file__).parent


def module_name(path):
    parts = path.relative_to(ROOT.parent).with_suffix('').parts
    return '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)


def imports_of(path, modules):
    """The mlcheck modules that the module at `path` imports."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            # `from mlcheck.judging import sanity` imports the module mlcheck.judging.sanity
            names = [f'{node.module}.{alias.name}' for alias in node.names] + [node.module]
        else:
            continue
        found.update(name for name in names if name in modules)
    return found


def import_graph():
    paths = {module_name(p): p for p in ROOT.rglob('*.py')}
    return {name: imports_of(path, paths) - {name} for name, path in paths.items()}


def package_of(name):
    """mlcheck.figures.rank_speed -> mlcheck.figures; a plain module (mlcheck.errors) is its own."""
    return '.'.join(name.split('.')[:2])


def package_graph(graph):
    """The module graph with each package's modules merged into one node."""
    packages = {package_of(name): set() for name in graph}
    for name, imported in graph.items():
        packages[package_of(name)].update(map(package_of, imported))
    return {name: imported - {name} for name, imported in packages.items()}


def cycles(graph):
    """Each import cycle once, as a list of modules [a, b, ..., a]."""
    found, done = [], set()

    def visit(name, path):
        if name in path:
            cycle = path[path.index(name):] + [name]
            if frozenset(cycle) not in done:
                done.add(frozenset(cycle))
                found.append(cycle)
            return
        if name in finished:
            return
        for imported in sorted(graph[name]):
            visit(imported, path + [name])
        finished.add(name)

    finished = set()
    for name in sorted(graph):
        visit(name, [])
    return found


def test_the_walk_finds_a_cycle():
    graph = {'a': {'b'}, 'b': {'c'}, 'c': {'a'}, 'd': {'a'}}
    assert cycles(graph) == [['a', 'b', 'c', 'a']]
    assert cycles({'a': {'b'}, 'b': set()}) == []


def test_the_walk_reads_both_forms_of_import(tmp_path):
    modules = {'mlcheck.judging.sanity', 'mlcheck.judging', 'mlcheck.site.settings'}
    source = tmp_path / 'x.py'
    source.write_text('from mlcheck.judging import sanity\n'
                      'def f():\n    import mlcheck.site.settings\n')
    assert imports_of(source, modules) == {'mlcheck.judging.sanity', 'mlcheck.judging', 'mlcheck.site.settings'}


def test_no_module_of_mlcheck_imports_itself_through_others():
    graph = import_graph()
    assert 'mlcheck.judging.sanity' in graph and graph['mlcheck.judging.sanity']
    assert cycles(graph) == []


def test_the_package_walk_finds_a_loop_that_no_module_loop_shows():
    graph = {'mlcheck.a.x': {'mlcheck.b.y'}, 'mlcheck.b.y': set(),
             'mlcheck.b.z': {'mlcheck.a.w'}, 'mlcheck.a.w': {'mlcheck.errors'}, 'mlcheck.errors': set()}
    assert cycles(graph) == []
    assert cycles(package_graph(graph)) == [['mlcheck.a', 'mlcheck.b', 'mlcheck.a']]


def test_no_package_of_mlcheck_imports_itself_through_others():
    packages = package_graph(import_graph())
    assert 'mlcheck.judging' in packages['mlcheck.harness']
    assert cycles(packages) == []
