# from tvm import s_tir
def apply_trace(sch: s_tir.Schedule) -> None:
  b0 = sch.get_sblock(name="B", func_name="main")
  l1, l2 = sch.get_loops(block=b0)
  l3, l4 = sch.split(loop=l1, factors=[None, 32], preserve_unit_iters=True, disable_predication=False)
  l5, l6 = sch.split(loop=l2, factors=[None, 16], preserve_unit_iters=True, disable_predication=False)
  sch.reorder(l3, l5, l4, l6)
  b7 = sch.blockize(target=l6, preserve_unit_iters=True)
