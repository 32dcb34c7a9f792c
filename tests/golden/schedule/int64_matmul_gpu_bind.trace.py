# from tvm import s_tir
def apply_trace(sch: s_tir.Schedule) -> None:
  b0 = sch.get_sblock(name="matmul", func_name="main")
  l1, l2, l3 = sch.get_loops(block=b0)
  b4 = sch.cache_write(block=b0, write_buffer_index=0, storage_scope="local")
  l5, l6 = sch.split(loop=l1, factors=[None, 16], preserve_unit_iters=True, disable_predication=False)
  l7, l8 = sch.split(loop=l2, factors=[None, 16], preserve_unit_iters=True, disable_predication=False)
  sch.reorder(l5, l7, l6, l8, l3)
  sch.bind(loop=l5, thread_axis="blockIdx.y")
  sch.bind(loop=l7, thread_axis="blockIdx.x")
  sch.bind(loop=l6, thread_axis="threadIdx.y")
  sch.bind(loop=l8, thread_axis="threadIdx.x")
  sch.reverse_compute_at(block=b4, loop=l8, preserve_unit_loops=False, index=-1)
  b9 = sch.decompose_reduction(block=b0, loop=l3)
