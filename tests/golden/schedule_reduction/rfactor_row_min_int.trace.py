# from tvm import s_tir
def apply_trace(sch: s_tir.Schedule) -> None:
  b0 = sch.get_sblock(name="B", func_name="main")
  l1, l2 = sch.get_loops(block=b0)
  l3, l4 = sch.split(loop=l2, factors=[None, 16], preserve_unit_iters=True, disable_predication=False)
  b5 = sch.rfactor(loop=l3, factor_axis=1)
