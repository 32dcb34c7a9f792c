"""Golden files for issue 32: what Apache TVM 0.27 prints after the zero pipeline, per model.

A *developer tool* only, like ``tools/tvm_reference.py``: TVM is never a dependency of tvms,
and no test imports TVM or this file. The tests read what it wrote
(tests/compiler/test_zero_pipeline_fidelity.py). Run it from the repository root with the TVM
venv (setup in tools/tvm_reference.py)::

    /work/tvmref/bin/python tools/tvm_zero_pipeline_reference.py            # every model
    /work/tvmref/bin/python tools/tvm_zero_pipeline_reference.py conv2d_    # models whose name starts so

Each model is a small Relax function written with high-level ops, in the TVMScript both TVM 0.27
and tvms read. Per model ``<name>`` it writes, under ``tests/golden/zero_pipeline/``:

* ``<name>.input.tvms``: the model as written here;
* ``<name>.tvms``: TVM 0.27's ``relax.get_pipeline("zero")(mod).script()`` (its modern
  dialect: ``tirx``, ``T.sblock``; tvms reads it);
* or ``<name>.error.txt`` when TVM rejects the model or the pipeline;

and ``VERSION.txt``, the versions used.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "tests" / "golden" / "zero_pipeline"


def t(shape, dtype="float32") -> str:
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    return f'R.Tensor(({dims}), dtype="{dtype}")'


# name -> (parameters as (name, shape[, dtype]); a dim that is a string is symbolic, the dataflow
# lines; the last one's variable is the result)
MODELS = {
    # elementwise
    "add": ([("x", (4, 8)), ("y", (4, 8))], ["gv = R.add(x, y)"]),
    "multiply_chain": ([("x", (4, 8)), ("y", (4, 8))], ["a = R.multiply(x, y)", "b = R.subtract(a, x)",
                                                         "gv = R.multiply(b, b)"]),
    "exp_sigmoid": ([("x", (16,))], ["a = R.exp(x)", "gv = R.sigmoid(a)"]),
    "relu_clip": ([("x", (2, 32))], ["a = R.nn.relu(x)", "gv = R.clip(a, 0.0, 6.0)"]),
    "cast_chain": ([("x", (8, 8))], ['a = R.astype(x, "float16")', 'gv = R.astype(a, "float32")']),
    "gelu_tanh": ([("x", (4, 64))], ["gv = R.nn.gelu_tanh(x)"]),
    "silu_multiply": ([("x", (4, 64)), ("y", (4, 64))], ["a = R.nn.silu(x)", "gv = R.multiply(a, y)"]),
    "where": ([("c", (4, 4), "bool"), ("x", (4, 4)), ("y", (4, 4))], ["gv = R.where(c, x, y)"]),
    "where_broadcast": ([("c", (4, 1), "bool"), ("x", (4, 4)), ("y", (4,))], ["gv = R.where(c, x, y)"]),
    # the result's name (rule 1: TVM names the fused call that makes the block's output `gv`)
    "result_named_y": ([("x", (4, 8))], ['a = R.astype(x, "float16")', 'y = R.astype(a, "float32")']),
    "result_named_z": ([("x", (4, 8)), ("y", (4, 8))], ["a = R.add(x, y)", "z = R.nn.relu(a)"]),
    # broadcast
    "add_row": ([("x", (4, 8)), ("b", (8,))], ["gv = R.add(x, b)"]),
    "add_column": ([("x", (4, 8)), ("b", (4, 1))], ["gv = R.add(x, b)"]),
    "scale_by_constant": ([("x", (4, 8))], ['gv = R.multiply(x, R.const(0.5, "float32"))']),
    "broadcast_to": ([("x", (1, 8))], ["gv = R.broadcast_to(x, R.shape([4, 8]))"]),
    # reductions
    "sum_axis1": ([("x", (4, 8))], ["gv = R.sum(x, axis=[1])"]),
    "mean_keepdims": ([("x", (2, 3, 8))], ["gv = R.mean(x, axis=[2], keepdims=True)"]),
    "max_axis0": ([("x", (4, 8))], ["gv = R.max(x, axis=[0])"]),
    "variance": ([("x", (4, 8))], ["gv = R.variance(x, axis=[1])"]),
    "softmax": ([("x", (4, 16))], ["gv = R.nn.softmax(x, axis=-1)"]),
    "log_softmax": ([("x", (4, 16))], ["gv = R.nn.log_softmax(x, axis=-1)"]),
    # reshape, flatten, transpose
    "reshape_3d": ([("x", (2, 24))], ["gv = R.reshape(x, R.shape([2, 2, 3, 4]))"]),
    "flatten": ([("x", (2, 3, 4, 4))], ["gv = R.reshape(x, R.shape([2, 48]))"]),
    "transpose": ([("x", (2, 3, 4))], ["gv = R.permute_dims(x, axes=[2, 0, 1])"]),
    "transpose_then_reshape": ([("x", (2, 16, 32))], ["a = R.permute_dims(x, axes=[0, 2, 1])",
                                                       "gv = R.reshape(a, R.shape([2, 512]))"]),
    "expand_squeeze": ([("x", (4, 8))], ["a = R.expand_dims(x, axis=[1])", "b = R.add(a, a)",
                                         "gv = R.squeeze(b, axis=[1])"]),
    "concat": ([("x", (2, 3)), ("y", (2, 5))], ["gv = R.concat((x, y), axis=1)"]),
    "strided_slice": ([("x", (8, 8))], ["gv = R.strided_slice(x, axes=[0, 1], begin=[1, 0], end=[7, 8], "
                                        "strides=[2, 1])"]),
    "take": ([("x", (10, 4)), ("i", (3,), "int64")], ["gv = R.take(x, i, axis=0)"]),
    "take_then_multiply": ([("x", (10, 4)), ("i", (3,), "int64")],
                           ["a = R.take(x, i, axis=0)", 'gv = R.multiply(a, R.const(2.0, "float32"))']),
    "reshape_to_1d": ([("x", (2, 3, 4))], ["gv = R.reshape(x, R.shape([24]))"]),
    "reshape_split_last": ([("x", (4, 12))], ["a = R.reshape(x, R.shape([4, 3, 4]))", "gv = R.nn.relu(a)"]),
    # pooling
    "max_pool2d": ([("x", (1, 4, 8, 8))], ["gv = R.nn.max_pool2d(x, pool_size=[2, 2], strides=[2, 2])"]),
    "avg_pool2d_padded": ([("x", (1, 4, 8, 8))], ["gv = R.nn.avg_pool2d(x, pool_size=[3, 3], strides=[1, 1], "
                                                 "padding=[1, 1, 1, 1])"]),
    "avg_pool2d_stride2": ([("x", (1, 4, 8, 8))], ["gv = R.nn.avg_pool2d(x, pool_size=[3, 3], strides=[2, 2], "
                                                  "padding=[1, 1, 1, 1])"]),
    "avg_pool2d_2x2": ([("x", (1, 4, 8, 8))], ["gv = R.nn.avg_pool2d(x, pool_size=[2, 2], strides=[2, 2])"]),
    "avg_pool2d_count_pad": ([("x", (1, 4, 8, 8))], ["gv = R.nn.avg_pool2d(x, pool_size=[3, 3], strides=[1, 1], "
                                                    "padding=[1, 1, 1, 1], count_include_pad=True)"]),
    "avg_pool2d_dilated": ([("x", (1, 4, 8, 8))], ["gv = R.nn.avg_pool2d(x, pool_size=[3, 3], strides=[1, 1], "
                                                  "padding=[1, 1, 1, 1], dilation=[2, 2])"]),
    "adaptive_avg_pool2d": ([("x", (1, 4, 7, 7))], ["gv = R.nn.adaptive_avg_pool2d(x, output_size=[1, 1])"]),
    # convolutions
    "conv2d": ([("x", (1, 3, 8, 8)), ("w", (4, 3, 3, 3))], ["gv = R.nn.conv2d(x, w)"]),
    "conv2d_bias_relu": ([("x", (1, 3, 8, 8)), ("w", (4, 3, 3, 3)), ("b", (1, 4, 1, 1))],
                         ["a = R.nn.conv2d(x, w, padding=[1, 1, 1, 1])", "c = R.add(a, b)", "gv = R.nn.relu(c)"]),
    "conv2d_stride2": ([("x", (1, 4, 9, 9)), ("w", (8, 4, 3, 3))],
                       ["gv = R.nn.conv2d(x, w, strides=[2, 2], padding=[1, 1, 1, 1])"]),
    "conv2d_depthwise": ([("x", (1, 8, 6, 6)), ("w", (8, 1, 3, 3))],
                         ["gv = R.nn.conv2d(x, w, padding=[1, 1, 1, 1], groups=8)"]),
    "conv1d": ([("x", (1, 4, 16)), ("w", (8, 4, 3))], ["gv = R.nn.conv1d(x, w, padding=[1, 1])"]),
    # matmul shapes
    "matmul": ([("x", (4, 8)), ("w", (8, 16))], ["gv = R.matmul(x, w)"]),
    "matvec": ([("x", (4, 8)), ("v", (8,))], ["gv = R.matmul(x, v)"]),
    "vecmat": ([("v", (8,)), ("w", (8, 16))], ["gv = R.matmul(v, w)"]),
    "batch_matvec": ([("x", (2, 4, 8)), ("v", (8,))], ["gv = R.matmul(x, v)"]),
    "matvec_relu": ([("x", (4, 8)), ("v", (8,))], ["a = R.matmul(x, v)", "gv = R.nn.relu(a)"]),
    "batch_matmul": ([("x", (2, 4, 8)), ("w", (2, 8, 16))], ["gv = R.matmul(x, w)"]),
    "broadcast_matmul": ([("x", (2, 4, 8)), ("w", (8, 16))], ["gv = R.matmul(x, w)"]),
    "linear": ([("x", (4, 8)), ("w", (16, 8)), ("b", (16,))],
               ["wt = R.permute_dims(w, axes=None)", "a = R.matmul(x, wt)", "gv = R.add(a, b)"]),
    "mlp": ([("x", (1, 32)), ("w1", (64, 32)), ("b1", (64,)), ("w2", (10, 64)), ("b2", (10,))],
            ["t1 = R.permute_dims(w1, axes=None)", "m1 = R.matmul(x, t1)", "a1 = R.add(m1, b1)",
             "r1 = R.nn.relu(a1)", "t2 = R.permute_dims(w2, axes=None)", "m2 = R.matmul(r1, t2)",
             "gv = R.add(m2, b2)"]),
    # attention
    "attention": ([("q", (1, 8, 16)), ("k", (1, 8, 16)), ("v", (1, 8, 16))],
                  ["kt = R.permute_dims(k, axes=[0, 2, 1])", "s = R.matmul(q, kt)",
                   'c = R.multiply(s, R.const(0.25, "float32"))', "p = R.nn.softmax(c, axis=-1)",
                   "gv = R.matmul(p, v)"]),
    # normalization
    "layer_norm": ([("x", (4, 16)), ("g", (16,)), ("b", (16,))],
                   ["gv = R.nn.layer_norm(x, g, b, axes=[-1])"]),
    "rms_norm": ([("x", (4, 16)), ("g", (16,))], ["gv = R.nn.rms_norm(x, g, axes=[-1])"]),
    "batch_norm": ([("x", (1, 4, 4, 4)), ("g", (4,)), ("b", (4,)), ("m", (4,)), ("v", (4,))],
                   ["bn = R.nn.batch_norm(x, g, b, m, v, axis=1)", "gv = bn[0]"]),
    # symbolic shapes
    "symbolic_add": ([("x", ("n", 16)), ("y", ("n", 16))], ["gv = R.add(x, y)"]),
    "symbolic_matmul": ([("x", ("n", 32)), ("w", (32, 16))], ["gv = R.matmul(x, w)"]),
    "symbolic_softmax": ([("x", ("n", "m"))], ["gv = R.nn.softmax(x, axis=-1)"]),
    "symbolic_reshape_transpose": ([("x", ("n", 64))], ["a = R.reshape(x, R.shape([n, 4, 16]))",
                                                        "gv = R.permute_dims(a, axes=[1, 0, 2])"]),
    "symbolic_linear_relu": ([("x", ("n", 32)), ("w", (32, 16)), ("b", (16,))],
                             ["a = R.matmul(x, w)", "c = R.add(a, b)", "gv = R.nn.relu(c)"]),
}


def source(params, lines) -> str:
    def dim(d):
        return f'"{d}"' if isinstance(d, str) else str(d)

    def sig(p):
        name, shape = p[0], p[1]
        dtype = p[2] if len(p) > 2 else "float32"
        dims = ", ".join(dim(d) for d in shape) + ("," if len(shape) == 1 else "")
        return f'{name}: R.Tensor(({dims}), dtype="{dtype}")'

    body = "\n".join(f"            {line}" for line in lines)
    result = lines[-1].split("=", 1)[0].strip()
    # a symbolic dimension the body names (``R.shape([n, 4])``) is declared first
    symbols = dict.fromkeys(d for p in params for d in p[1] if isinstance(d, str)
                            and re.search(rf"\b{d}\b", " ".join(lines)))
    decls = "".join(f"        {d} = T.int64()\n" for d in symbols)
    header = "# from tvm.script import ir as I\n" + ("# from tvm.script import tir as T\n" if decls else "")
    return (header + "# from tvm.script import relax as R\n\n"
            "@I.ir_module\nclass Module:\n    @R.function\n"
            f"    def main({', '.join(sig(p) for p in params)}):\n{decls}"
            f"        with R.dataflow():\n{body}\n            R.output({result})\n        return {result}\n")


def main(argv) -> int:
    import tvm
    from tvm import relax

    OUT.mkdir(parents=True, exist_ok=True)
    prefixes = [a for a in argv if not a.startswith("-")]
    for name, (params, lines) in MODELS.items():
        if prefixes and not any(name.startswith(p) for p in prefixes):
            continue
        text = source(params, lines)
        (OUT / f"{name}.input.tvms").write_text(text)
        for stale in (OUT / f"{name}.tvms", OUT / f"{name}.error.txt"):
            stale.unlink(missing_ok=True)
        try:
            mod = tvm.script.from_source(text)
            printed = relax.get_pipeline("zero")(mod).script()
        except Exception as err:  # noqa: BLE001 - a fact about TVM, kept as the golden
            (OUT / f"{name}.error.txt").write_text(f"{type(err).__name__}\n{str(err).strip().splitlines()[-1]}\n")
            print(f"{name}: TVM rejects it ({type(err).__name__})")
            continue
        (OUT / f"{name}.tvms").write_text(printed)
        print(f"{name}: written")
    (OUT / "VERSION.txt").write_text(f"apache-tvm {tvm.__version__}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
