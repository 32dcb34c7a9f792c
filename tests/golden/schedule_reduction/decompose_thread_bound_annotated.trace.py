# from tvm import s_tir
def apply_trace(sch: s_tir.Schedule) -> None:
  b0 = sch.get_sblock(name="C", func_name="main")
  l1, l2, l3 = sch.get_loops(block=b0)
  sch.bind(loop=l1, thread_axis="blockIdx.x")
  sch.bind(loop=l2, thread_axis="threadIdx.x")
  sch.annotate(block_or_loop=b0, ann_key="foo", ann_val=1)
  b4 = sch.decompose_reduction(block=b0, loop=l1)
