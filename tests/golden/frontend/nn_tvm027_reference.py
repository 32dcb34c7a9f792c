"""Write nn_<model>.tvm027.txt: what Apache TVM 0.27's ``relax.frontend.nn`` prints for the
models of tests/frontends/test_frontend_nn.py. Run it with TVM's Python, never from the tests:

    /work/tvmref/bin/python tests/golden/frontend/nn_tvm027_reference.py

The model classes are taken from the test file's source as they are, and run with TVM's ``nn``
in place of ours. What TVM 0.27's ``nn`` lacks is filled in with the op and binding name ours
uses — ``nn.Sequential`` (a ModuleList built from arguments), ``nn.Dropout`` (identity at
inference), ``nn.op.mean`` and ``nn.op.tril`` (``R.mean``/``R.tril`` bound as ``mean``/``tril``)
— so the files show TVM's choices for everything else.
"""

from __future__ import annotations

import ast
import math
import pathlib

from tvm import relax
from tvm.relax.frontend import nn
from tvm.relax.frontend.nn import op
from tvm.relax.frontend.nn.core import wrap_nested

HERE = pathlib.Path(__file__).resolve().parent
TEST_FILE = HERE.parents[1] / "frontends" / "test_frontend_nn.py"
MODELS = {  # golden name -> (classes to take from the test file, model class, spec)
    "nn_cnn": (["CNN"], "CNN", {"forward": {"x": nn.spec.Tensor((2, 3, 6, 6), "float32")}}),
    "nn_transformer": (["Attention", "Block"], "Block", {"forward": {"ids": nn.spec.Tensor((1, "n"), "int32")}}),
}


class Sequential(nn.ModuleList):
    def __init__(self, *modules):
        super().__init__(list(modules))


class Dropout(nn.Module):
    def __init__(self, p=0.5):
        self.p = p

    def forward(self, x):
        return x


def mean(x, axis=None, keepdims=False, name="mean"):
    return wrap_nested(relax.op.mean(x._expr, axis, keepdims), name)


def tril(x, diagonal=0, name="tril"):
    return wrap_nested(relax.op.tril(x._expr, diagonal), name)


def class_sources(names: list) -> str:
    tree = ast.parse(TEST_FILE.read_text())
    source = TEST_FILE.read_text()
    found = {n.name: ast.get_source_segment(source, n) for n in tree.body if isinstance(n, ast.ClassDef)}
    return "\n\n".join(found[name] for name in names)


def main() -> None:
    nn.Sequential, nn.Dropout, op.mean, op.tril = Sequential, Dropout, mean, tril
    for golden, (classes, model, spec) in MODELS.items():
        namespace = {"nn": nn, "op": op, "math": math}
        exec(class_sources(classes), namespace)  # noqa: S102 - the repository's own test code
        mod, _ = namespace[model]().export_tvm(spec)
        (HERE / f"{golden}.tvm027.txt").write_text(mod.script())
        print("wrote", golden)


if __name__ == "__main__":
    main()
