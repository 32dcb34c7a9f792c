"""Tuning's search space (compiler/meta_schedule/: schedule_rules/, space.py, postproc.py).

What is checked, on a matmul, a batch matmul, a conv2d with its padding stage, a softmax and an
elementwise chain:

* CPU ("llvm"): the design spaces have TVM's shape (multi-level tiling "SSRSRS" with and
  without a write cache at levels 1 and 2, the cheap stages inlined, the padding and the
  softmax stages at sampled compute locations); 20 candidates of each workload, seeds 0..19,
  are finished by the postprocessors, compile, and match NumPy; no draw is illegal;
* determinism: a seed fixes the design spaces and every candidate; other seeds draw others;
* records: a finished candidate's trace (sampling, ``enter_postproc``, the postprocessors'
  steps) replays, through JSON too, to the identical finished module, and its sampled part
  (`strip_postprocs`) finishes again to it;
* GPU ("cuda"): finished candidates bind every block to blockIdx/threadIdx, pass VerifyGPUCode
  (which rejects the ones that do not fit: too many threads, too few for a tiled block), their
  shared-memory copies are spread over the threads, NVRTC compiles them, and in the CUDA
  emulator they compute what NumPy computes; the softmax's reductions are cross-thread ones;
* the postprocessors one by one: unrolling as TVM's UnrollLoop decides it, parallel and vector
  loops, reductions decomposed, loops of unknown extent refused; illegal draws retried and
  counted.
"""

from __future__ import annotations

import functools
import json
import shutil

import numpy as np
import pytest

import tvmscript as tvms
from support.sampled_schedules import conv2d_src, matmul_src
from tvmscript.compiler.meta_schedule.postproc import (
    ENTER_POSTPROC, NO_DEFAULT_SCHEDULE, RewriteParallelVectorizeUnroll, finish, mark_scheduled, replay_finished,
    strip_postprocs)
from tvmscript.compiler.meta_schedule.schedule_rules import ScheduleRule
from tvmscript.compiler.meta_schedule.schedule_rules.analysis import (
    COOPERATIVE_FETCH, TILING_STRUCTURE, UNROLL_EXPLICIT, loop_iter_type)
from tvmscript.compiler.schedule_choices import CHOICES_ATTR
from tvmscript.compiler.meta_schedule.space import SampleStats, SamplingError, generate_design_space, sample_candidate
from tvmscript.compiler.schedule import Schedule
from tvmscript.compiler.schedule.common import blocks_under, iter_kinds_of_loop
from tvmscript.compiler.schedule.trace import Trace
from tvmscript.ir.structural import structural_equal

MATMUL = matmul_src(128, 256, 64)

BATCH_MATMUL = '''
@T.prim_func
def main(A: T.Buffer((4, 32, 64), "float32"), B: T.Buffer((4, 64, 48), "float32"),
         C: T.Buffer((4, 32, 48), "float32")):
    for b, i, j, k in T.grid(4, 32, 48, 64):
        with T.block("C"):
            vb, vi, vj, vk = T.axis.remap("SSSR", [b, i, j, k])
            with T.init():
                C[vb, vi, vj] = T.float32(0)
            C[vb, vi, vj] = C[vb, vi, vj] + A[vb, vi, vk] * B[vb, vk, vj]
'''

CONV2D = conv2d_src(4, 8, 12)


def softmax_src(rows: int, cols: int) -> str:
    return f'''
@T.prim_func
def main(A: T.Buffer(({rows}, {cols}), "float32"), Out: T.Buffer(({rows}, {cols}), "float32")):
    mx = T.alloc_buffer(({rows},))
    ex = T.alloc_buffer(({rows}, {cols}))
    sm = T.alloc_buffer(({rows},))
    for i, k in T.grid({rows}, {cols}):
        with T.block("max"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                mx[vi] = T.float32(-3.0e38)
            mx[vi] = T.max(mx[vi], A[vi, vk])
    for i, j in T.grid({rows}, {cols}):
        with T.block("exp"):
            vi, vj = T.axis.remap("SS", [i, j])
            ex[vi, vj] = T.exp(A[vi, vj] - mx[vi])
    for i, k in T.grid({rows}, {cols}):
        with T.block("sum"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                sm[vi] = T.float32(0)
            sm[vi] = sm[vi] + ex[vi, vk]
    for i, j in T.grid({rows}, {cols}):
        with T.block("norm"):
            vi, vj = T.axis.remap("SS", [i, j])
            Out[vi, vj] = ex[vi, vj] / sm[vi]
'''


ELEMENTWISE = '''
@T.prim_func
def main(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64,), "float32"), C: T.Buffer((64, 64), "float32")):
    t0 = T.alloc_buffer((64, 64))
    t1 = T.alloc_buffer((64, 64))
    for i, j in T.grid(64, 64):
        with T.block("add"):
            vi, vj = T.axis.remap("SS", [i, j])
            t0[vi, vj] = A[vi, vj] + B[vj]
    for i, j in T.grid(64, 64):
        with T.block("mul"):
            vi, vj = T.axis.remap("SS", [i, j])
            t1[vi, vj] = t0[vi, vj] * T.float32(2)
    for i, j in T.grid(64, 64):
        with T.block("relu"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = T.max(t1[vi, vj], T.float32(0))
'''


def _conv_ref(x, w):
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((x.shape[0], w.shape[0]) + x.shape[2:], "float32")
    for ry in range(3):
        for rx in range(3):
            out += np.einsum("nchw,fc->nfhw", xp[:, :, ry:ry + x.shape[2], rx:rx + x.shape[3]], w[:, :, ry, rx])
    return out


def _softmax_ref(a):
    e = np.exp(a - a.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


# The softmax's rows are 16 long on the CPU: a max-reduction chain of 32 or more unrolled
# inside a loop makes LLVM's loop + SLP vectorizers run for minutes (a codegen_llvm issue, not
# the search space's); on a GPU they are 128 long, so that cross-thread reduction applies.
WORKLOADS = {   # name -> (source for the CPU, source for the GPU, NumPy reference of the inputs)
    "matmul": (MATMUL, MATMUL, lambda a, b: a @ b),
    "batch_matmul": (BATCH_MATMUL, BATCH_MATMUL, lambda a, b: a @ b),
    "conv2d": (CONV2D, CONV2D, _conv_ref),
    "softmax": (softmax_src(64, 16), softmax_src(64, 128), _softmax_ref),
    "elementwise": (ELEMENTWISE, ELEMENTWISE, lambda a, b: np.maximum((a + b) * 2, 0)),
}
TILED = ("matmul", "batch_matmul", "conv2d")


@functools.lru_cache(maxsize=None)
def func(name: str, target: str = "llvm"):
    src = WORKLOADS[name][0 if target == "llvm" else 1]
    return tvms.parse(src)


def arguments(f, seed: int = 0) -> list:
    """Random inputs and a zero output, one array per parameter."""
    rng = np.random.default_rng(seed)
    shapes = [[int(s.value) for s in f.buffer_map[p].shape] for p in f.params]
    return [rng.standard_normal(s).astype("float32") for s in shapes[:-1]] + [np.zeros(shapes[-1], "float32")]


def expected(name: str, args: list) -> np.ndarray:
    return WORKLOADS[name][2](*args[:-1])


def run_cpu(mod, name: str, f) -> None:
    args = arguments(f)
    nd = [tvms.nd.array(a) for a in args]
    tvms.compile(mod)["main"](*nd)
    np.testing.assert_allclose(nd[-1].numpy(), expected(name, args), rtol=1e-4, atol=1e-4)


def _kind_for(sch: Schedule, block_name: str, loop) -> str:
    """The kind of the block's iterators a loop feeds ("S" or "R"; "" if none)."""
    return "".join(sorted(iter_kinds_of_loop(sch.index("main").blocks[block_name], loop.loop_var)))


def leaf_loops(sch: Schedule, block_name: str) -> list:
    """The For nodes above a block, outermost first."""
    idx = sch.index("main")
    return idx.loops_above(idx.blocks[block_name])


# ----------------------------------------------------------------------------- CPU


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_twenty_cpu_candidates_compile_and_match_numpy(name):
    f = func(name)
    spaces = generate_design_space(f, "llvm")
    stats = SampleStats()
    for seed in range(20):
        cand = sample_candidate(spaces[seed % len(spaces)], seed, stats=stats)
        mod = finish(cand, "llvm")
        assert mod is not None, f"seed {seed}: a postprocessor rejected a CPU candidate"
        # (The default schedule's picks, `DefaultScheduleChoices`: the build schedules it.)
        assert mod["main"].attrs.get(NO_DEFAULT_SCHEDULE) is True or CHOICES_ATTR in mod["main"].attrs
        run_cpu(mod, name, f)
    assert (stats.tries, stats.failures) == (20, 0), stats.errors


@pytest.mark.parametrize("name", TILED)
def test_cpu_spaces_tile_ssrsrs_with_and_without_a_write_cache(name):
    f = func(name)
    spaces = generate_design_space(f, "llvm")
    choices = [s for s in spaces if CHOICES_ATTR in s.func("main").attrs]
    assert len(choices) == 1, "the default schedule with its picks sampled"
    spaces = [s for s in spaces if s not in choices]
    assert len(spaces) == 3, "multi-level tiling with reuse_write 'may' at levels 1, 2: three spaces"
    block = "C" if name != "conv2d" else "conv"
    orig = Schedule(f)
    iters = orig.get(orig.get_block(block)).iter_vars
    n_s, n_r = sum(iv.kind == "S" for iv in iters), sum(iv.kind == "R" for iv in iters)
    cache_levels = set()
    for seed, space in enumerate(spaces):
        cand = sample_candidate(space, seed)
        assert cand.get(cand.get_block(block)).annotations[TILING_STRUCTURE] == "SSRSRS"
        loops = leaf_loops(cand, block)
        kinds = "".join(_kind_for(cand, block, lp) for lp in loops)
        assert kinds == "S" * (2 * n_s) + "R" * n_r + "S" * n_s + "R" * n_r + "S" * n_s, kinds
        # Each iterator's tiles multiply to its extent: the loops of iterator n are n, n + #, ...
        per_level = [n_s, n_s, n_r, n_s, n_r, n_s]
        starts = [sum(per_level[:i]) for i in range(6)]
        for axis, iv in enumerate([iv for iv in iters if iv.kind == "S"]):
            extents = [loops[starts[level] + axis].extent.value for level in (0, 1, 3, 5)]
            assert int(np.prod(extents)) == iv.dom.extent.value
        cache = [r.block.name for r in blocks_under(cand.func("main").body) if r.block.name.endswith("_global")]
        if not cache:
            cache_levels.add(0)
            continue
        # The write cache sits under the tiles of its level: the first S level, or both.
        shared = [lp for lp in leaf_loops(cand, cache[0]) if any(lp is x for x in loops)]
        assert len(shared) in (n_s, 2 * n_s)
        cache_levels.add(len(shared) // n_s)
    assert cache_levels == {0, 1, 2}


def test_cpu_rules_inline_cheap_stages_and_keep_the_ones_tvm_keeps():
    sch = sample_candidate(generate_design_space(func("elementwise"), "llvm")[0], 0)
    assert [r.block.name for r in blocks_under(sch.func("main").body)] == ["relu"]
    conv = sample_candidate(generate_design_space(func("conv2d"), "llvm")[0], 0)
    assert "pad" in conv.index("main").blocks, "a padding's if_then_else is not inlined on the CPU"
    softmax = sample_candidate(generate_design_space(func("softmax"), "llvm")[0], 0)
    assert "exp" in softmax.index("main").blocks, "exp is not recomputed per use on the CPU"
    gpu_conv = generate_design_space(func("conv2d", "cuda"), "cuda")[0]
    assert "pad" not in gpu_conv.index("main").blocks, "on a GPU the padding goes into the shared copy"


def test_random_compute_location_samples_the_root_and_loops():
    space = generate_design_space(func("softmax"), "llvm")[0]
    kinds = [inst.kind for inst in space.trace.insts]
    assert kinds.count("sample_compute_location") == 3, "max, exp and sum each get a compute location"
    assert "sample_perfect_tile" not in kinds, "row reductions have no reuse to tile"
    seen = set()
    for seed in range(12):
        cand = sample_candidate(space, seed)
        seen |= {inst.decision for inst in cand.trace.insts if inst.kind == "sample_compute_location"}
    assert -1 in seen and max(seen) >= 1, seen


def test_parallel_and_vector_loops_from_the_root_annotations():
    mod = finish(sample_candidate(generate_design_space(func("elementwise"), "llvm")[0], 0), "llvm")
    root = mod["main"].body.block
    assert not root.annotations, "the rule's annotations are consumed"
    outer = root.body
    assert outer.kind == "parallel" and outer.extent.value == 64
    assert outer.body.kind == "vectorized" and outer.body.extent.value == 64


UNROLL_NEST = '''
@T.prim_func
def main(A: T.Buffer((16, 4, 8), "float32"), C: T.Buffer((16,), "float32")):
    for i, j, k in T.grid(16, 4, 8):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SRR", [i, j, k])
            with T.init():
                C[vi] = T.float32(0)
            C[vi] = C[vi] + A[vi, vj, vk]
'''


@pytest.mark.parametrize("max_step, kinds", [(0, "sss"), (16, "ssu"), (64, "suu"), (512, "suu"), (1024, "uuu")])
def test_unrolling_follows_tvms_unroll_loop(max_step, kinds):
    """Two statements (the init and the update) per iteration: k unrolls at 16 steps (8 x 2),
    j too at 64 (4 x 16), i only at 1024 (16 x 64); the annotations record the limit."""
    sch = Schedule(tvms.parse(UNROLL_NEST))
    sch.annotate(sch.get_block("root"), UNROLL_EXPLICIT, max_step)
    assert RewriteParallelVectorizeUnroll().apply(sch)
    loops = leaf_loops(sch, "C")
    assert "".join(lp.kind[0] for lp in loops) == kinds
    expected_ann = {"pragma_auto_unroll_max_step": max_step, "pragma_unroll_explicit": 1} if max_step else {}
    assert dict(loops[0].annotations) == expected_ann
    run_cpu_sum = tvms.compile(mark_scheduled(sch.mod))["main"]
    a = np.random.default_rng(0).standard_normal((16, 4, 8)).astype("float32")
    c = tvms.nd.array(np.zeros(16, "float32"))
    run_cpu_sum(tvms.nd.array(a), c)
    np.testing.assert_allclose(c.numpy(), a.sum((1, 2)), rtol=1e-5, atol=1e-5)


def test_reductions_are_decomposed_and_dynamic_loops_refused():
    mod = finish(sample_candidate(generate_design_space(func("matmul"), "llvm")[1], 3), "llvm")
    blocks = [r.block for r in blocks_under(mod["main"].body)]
    assert {b.name for b in blocks} >= {"C_init", "C_update"} and all(b.init is None for b in blocks)
    dynamic = tvms.parse('''
@T.prim_func
def main(a: T.handle, c: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n, 64), "float32")
    C = T.match_buffer(c, (n,), "float32")
    for i, k in T.grid(n, 64):
        with T.block("C"):
            vi, vk = T.axis.remap("SR", [i, k])
            with T.init():
                C[vi] = T.float32(0)
            C[vi] = C[vi] + A[vi, vk]
''')
    spaces = generate_design_space(dynamic, "llvm")
    assert finish(sample_candidate(spaces[0], 0), "llvm") is None


# ----------------------------------------------------------------------------- determinism, records


def test_a_seed_fixes_the_spaces_and_the_candidates():
    f = func("conv2d")
    first, again = generate_design_space(f, "llvm", seed=5), generate_design_space(f, "llvm", seed=5)
    assert [s.trace.as_json() for s in first] == [s.trace.as_json() for s in again]
    a, b = sample_candidate(first[1], 11), sample_candidate(again[1], 11)
    assert a.trace.decisions == b.trace.decisions and structural_equal(a.mod, b.mod)
    drawn = {json.dumps(sample_candidate(first[1], seed).trace.decisions) for seed in range(8)}
    assert len(drawn) > 4, "eight seeds drew few distinct candidates"


@pytest.mark.parametrize("target, name", [("llvm", "matmul"), ("llvm", "softmax"), ("cuda", "conv2d")])
def test_a_finished_trace_replays_and_round_trips_json(target, name):
    f = func(name, target)
    if target == "cuda":
        cand, mod = gpu_candidates(name)[0]
    else:
        cand = sample_candidate(generate_design_space(f, "llvm")[-1], 4)
        mod = finish(cand, "llvm")
    kinds = [inst.kind for inst in cand.trace.insts]
    at = kinds.index(ENTER_POSTPROC)
    assert len(kinds) > at + 1, "the postprocessors' steps are in the trace"
    data = json.loads(json.dumps(cand.trace.as_json()))
    assert structural_equal(replay_finished(f, data), mod)
    assert structural_equal(replay_finished(f, cand.trace), mod)
    design = strip_postprocs(Trace.from_json(data))
    assert len(design) == at and ENTER_POSTPROC not in [i.kind for i in design.insts]
    sch = Schedule(f)
    design.apply_to_schedule(sch)
    assert structural_equal(finish(sch, target), mod), "the sampled part finishes to the same module"


SPLIT_SEED = 0   # a seed whose design space itself draws the legal factor


class _SampledSplit(ScheduleRule):
    """Splits relu's inner loop (64) into [c, 16], c sampled from ``choices``: c = 1 is illegal
    (16 iterations cannot cover 64), c = 4 is legal."""

    def __init__(self, choices):
        self.choices = choices

    def apply(self, sch, block):
        if block.name == "relu":
            c = sch.sample_categorical(self.choices, [1.0 / len(self.choices)] * len(self.choices))
            sch.split(sch.get_loops(block)[1], factors=[c, 16])
        return [sch]


def test_illegal_draws_are_retried_and_counted():
    f = func("elementwise")
    space = generate_design_space(f, "llvm", rules=[_SampledSplit([1, 4])], seed=SPLIT_SEED)[0]
    stats = SampleStats()
    for seed in range(10):
        cand = sample_candidate(space, seed, stats=stats)
        assert [lp.extent.value for lp in leaf_loops(cand, "relu")] == [64, 4, 16]
    assert stats.tries == 10 + stats.failures and stats.failures > 0
    assert "smaller than the loop's extent" in stats.errors[-1]
    # A space whose only choice is illegal: every retry fails, and the error says how often.
    data = space.trace.as_json()
    for inst in data["insts"]:
        if inst[0] == "sample_categorical":
            inst[1] = [["candidates", [1]], ["probs", [1.0]], ["decision", 0]]
    space.trace = Trace.from_json(data)
    stats = SampleStats()
    with pytest.raises(SamplingError, match="3 draws"):
        sample_candidate(space, 0, retries=3, stats=stats)
    assert (stats.tries, stats.failures) == (3, 3)


# ----------------------------------------------------------------------------- GPU


@functools.lru_cache(maxsize=None)
def gpu_candidates(name: str, want: int = 2, tries: int = 80) -> tuple:
    """The first ``want`` finished GPU candidates (seeds 0, 1, ..., spaces in turn)."""
    f = func(name, "cuda")
    spaces = generate_design_space(f, "cuda")
    found = []
    for seed in range(tries):
        cand = sample_candidate(spaces[seed % len(spaces)], seed)
        mod = finish(cand, "cuda")
        if mod is not None:
            found.append((cand, mod))
            if len(found) == want:
                break
    assert found, f"no GPU candidate of {name} in {tries} draws passed the postprocessors"
    return tuple(found)


def _threads_above(mod, block_name: str) -> set:
    sch = Schedule(mod)
    return {lp.thread_tag for lp in leaf_loops(sch, block_name) if lp.kind == "thread_binding"}


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_gpu_candidates_bind_threads_fit_the_gpu_and_compile(name):
    from tvmscript.compiler.build_cuda import build_cuda
    from tvmscript.compiler.nvrtc import NVRTCUnavailable, nvrtc_version
    from tvmscript.compiler.verify_gpu_code import gpu_code_errors

    for cand, mod in gpu_candidates(name):
        assert gpu_code_errors(mod["main"], "cuda") == []
        for realize in blocks_under(mod["main"].body):
            tags = _threads_above(mod, realize.block.name)
            assert "blockIdx.x" in tags and "threadIdx.x" in tags, (realize.block.name, tags)
            assert COOPERATIVE_FETCH not in realize.block.annotations
        shared = [r for r in blocks_under(mod["main"].body)   # the read caches: "<input>_shared"
                  if r.block.writes[0].buffer.scope == "shared" and r.block.name.endswith("_shared")]
        assert bool(shared) == (name in TILED), "the tiled blocks read their inputs through shared memory"
        for copy in shared:   # cooperative fetch: the copy's own loops include one on threadIdx.x
            own = leaf_loops(Schedule(mod), copy.block.name)[-3:]
            assert any(lp.kind == "thread_binding" and lp.thread_tag == "threadIdx.x" for lp in own)
        source = build_cuda({"main": mod["main"]}, "cuda", kind="source").source
        assert "__global__" in source and "threadIdx.x" in source
    try:
        nvrtc_version()
    except NVRTCUnavailable as err:
        pytest.skip(f"NVRTC: {err}")
    for _, mod in gpu_candidates(name):
        assert build_cuda({"main": mod["main"]}, "cuda", kind="ptx").ptx


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_a_gpu_candidate_computes_what_numpy_does_in_the_emulator(name):
    if shutil.which("g++") is None:
        pytest.skip("the CUDA emulator needs g++")
    from tvmscript.compiler.build_cuda import build_cuda
    from support.cuda_emulator import EmulatedModule

    _, mod = gpu_candidates(name)[0]
    args = arguments(func(name, "cuda"))
    want = expected(name, args)
    EmulatedModule(build_cuda({"main": mod["main"]}, "cuda", kind="source")).run("main", *args)
    np.testing.assert_allclose(args[-1], want, rtol=1e-4, atol=1e-4)


def test_gpu_softmax_reduces_across_threads():
    spaces = generate_design_space(func("softmax", "cuda"), "cuda")
    assert len(spaces) == 4, "each reduction with and without a cross-thread reduction"
    fused = []
    for space in spaces:
        realizes = space.index("main").blocks
        red = [n for n in ("max", "sum") if any(lp.kind == "thread_binding" and lp.thread_tag == "threadIdx.x"
                                                and loop_iter_type(lp) == "R" for lp in leaf_loops(space, n))]
        scopes = {n: realizes[n].block.writes[0].buffer.scope for n in ("max", "sum")}
        if red == ["max", "sum"] and set(scopes.values()) == {"shared"}:
            fused.append(space)
    assert len(fused) == 1, "one space runs the whole softmax in one thread block per row"


def test_verify_gpu_code_rejects_what_does_not_fit():
    f = func("matmul", "cuda")
    space = generate_design_space(f, "cuda")[0]
    tiles = [n for n, inst in enumerate(space.trace.insts) if inst.kind == "sample_perfect_tile"]
    i_tile, j_tile = tiles[0], tiles[1]

    def finished(i_factors, j_factors):
        trace = space.trace.with_decision(i_tile, i_factors).with_decision(j_tile, j_factors)
        sch = Schedule(f)
        trace.apply_to_schedule(sch)
        return finish(sch, "cuda")

    assert finished([2, 2, 8, 2, 2], [4, 2, 16, 2, 1]) is not None           # 128 threads, 4 vthreads
    assert finished([1, 2, 32, 2, 1], [1, 2, 64, 2, 1]) is None              # 2048 threads per block
    assert finished([8, 1, 2, 4, 2], [16, 1, 1, 4, 4]) is None               # 2 threads: below a warp
    assert finished([1, 16, 8, 1, 1], [4, 2, 16, 2, 1]) is None              # 32 virtual threads
