# from tvm import s_tir
def apply_trace(sch: s_tir.Schedule) -> None:
  b0 = sch.get_sblock(name="B", func_name="main")
  l1, l2 = sch.get_loops(block=b0)
  l3, l4 = sch.split(loop=l1, factors=[None, 8], preserve_unit_iters=True, disable_predication=False)
  sch.reorder(l3, l2, l4)
  b5 = sch.decompose_reduction(block=b0, loop=l2)
