# Which world a Python job is built for, read from its source without running it:
# "map-reduce" when its job class derives from flint_guest's MapReduce, "combine" when
# from Combine (through classes of the same module too), else "aggregate". Run by `flint`
# with the host's python3, isolated (-I -S), the source on its input and its path (for
# messages) as its argument: nothing of the job's is imported or run.
import ast
import sys
import traceback

try:
    tree = ast.parse(sys.stdin.buffer.read(), sys.argv[1])
except SyntaxError as e:
    # As Python says it: the author's file, line and caret, none of this script's frames.
    sys.stderr.write("".join(traceback.format_exception_only(e)))
    sys.exit(2)
bases = {}
for node in ast.walk(tree):
    if isinstance(node, ast.ClassDef):
        names = []
        for b in node.bases:
            if isinstance(b, ast.Name):
                names.append(b.id)
            elif isinstance(b, ast.Attribute):
                names.append(b.attr)
        bases[node.name] = names


def derives(name, base, seen=()):
    if name == base:
        return True
    return name not in seen and any(derives(b, base, seen + (name,)) for b in bases.get(name, []))


if any(derives(c, "MapReduce") for c in bases):
    print("map-reduce")
elif any(derives(c, "Combine") for c in bases):
    print("combine")
else:
    print("aggregate")
