# from tvm import s_tir
def apply_trace(sch: s_tir.Schedule) -> None:
  b0 = sch.get_sblock(name="C", func_name="main")
  l1, l2, l3 = sch.get_loops(block=b0)
  b4 = sch.decompose_reduction(block=b0, loop=l1)
  l5, l6 = sch.get_loops(block=b4)
  sch.vectorize(loop=l6)
  l7, l8, l9 = sch.get_loops(block=b0)
  sch.unroll(loop=l9)
