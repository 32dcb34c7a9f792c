"""``tvms show``: a file in canonical TVMScript, after the passes and GPU schedules asked for."""

from __future__ import annotations

import sys

from .options import add_pipeline_arguments, pipeline_options
from .program import Program
from .reporting import stream_is_terminal
from .sources import parse
from .writing import write_new_atomically


def register(sub) -> None:
    show = sub.add_parser("show", help="print a .tvms file in canonical TVMScript")
    show.add_argument("file", help="a .tvms file, or - for standard input")
    show.add_argument("--func", help="print only this function")
    show.add_argument("--no-color", action="store_true", help="plain text even on a terminal")
    show.add_argument("--show-meta", action="store_true",
                      help="print the metadata section (the values of large constants); left out by default, "
                      "as TVM's show() does")
    show.add_argument("--graph", metavar="OUT", default=None,
                      help="draw the dataflow of a Relax function (main, or --func) instead of printing: OUT.dot, "
                      "OUT.svg, OUT.png or OUT.pdf (the latter three need Graphviz's dot)")
    add_pipeline_arguments(show, default="none")
    show.add_argument("--target", default=None,
                      help="with a GPU target (cuda, 'cuda -arch=sm_90'), apply the default GPU schedules "
                      "(DLight: Matmul, GEMV, Reduction, GeneralReduction, Fallback) to every PrimFunc")
    show.set_defaults(handler=show_command)


def show_command(args) -> int:
    from .. import ir
    from ..printer import show

    parsed = parse(args.file)
    node = parsed.node
    if args.pipeline != "none" or args.bind or args.params or args.target:
        program = Program(node, parsed.text, "<stdin>" if args.file == "-" else args.file)
        program.transform(pipeline_options(args), args.func or "main", args.target or "llvm")
        if args.target:
            program.gpu_schedule(args.target)
        node = program.node
    if args.graph:
        return _draw(node, args.func or "main", args.graph)
    if args.func:
        if not isinstance(node, ir.IRModule):
            print("error: --func needs a file holding an @I.ir_module", file=sys.stderr)
            return 1
        if args.func not in node:
            names = ", ".join(gv.name_hint for gv in node.get_global_vars())
            print(f"error: no function named '{args.func}' (the module has: {names})", file=sys.stderr)
            return 1
        node = node[args.func]
    color = not args.no_color and stream_is_terminal(sys.stdout)
    show(node, color=color, show_meta=args.show_meta)
    return 0


def _draw(node, func: str, out: str) -> int:
    """``--graph OUT``: the dataflow of Relax function ``func`` written to ``out`` (its format by
    its extension), drawn first, so that a failed drawing leaves nothing behind."""
    from ..relax.dataflow_graph import GraphvizMissing, format_of, visualize

    try:
        fmt = format_of(out)
    except ValueError as err:
        print(f"error: --graph {err}", file=sys.stderr)
        return 1
    try:
        data = visualize(node, func).render(fmt)
    except (KeyError, TypeError) as err:
        print(f"error: --graph: {err.args[0] if err.args else err}", file=sys.stderr)
        return 1
    except GraphvizMissing as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    write_new_atomically(out, data)
    print(f"wrote {out}", file=sys.stderr)
    return 0
