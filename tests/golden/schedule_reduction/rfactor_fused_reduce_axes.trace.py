# from tvm import s_tir
def apply_trace(sch: s_tir.Schedule) -> None:
  b0 = sch.get_sblock(name="B", func_name="main")
  l1, l2, l3 = sch.get_loops(block=b0)
  l4 = sch.fuse(l2, l3, preserve_unit_iters=True)
  l5, l6 = sch.split(loop=l4, factors=[None, 16], preserve_unit_iters=True, disable_predication=False)
  b7 = sch.rfactor(loop=l6, factor_axis=0)
