# Which world a Python job is built for, read from its source without running it:
# "combine" when its job class derives from flint_guest's Combine (through classes of
# the same module too), else "aggregate". Run by `flint` with the host's python3.
import ast
import sys

tree = ast.parse(open(sys.argv[1], encoding="utf-8").read(), sys.argv[1])
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


def combines(name, seen=()):
    if name == "Combine":
        return True
    return name not in seen and any(combines(b, seen + (name,)) for b in bases.get(name, []))


print("combine" if any(combines(c) for c in bases) else "aggregate")
