# from tvm import s_tir
def apply_trace(sch: s_tir.Schedule) -> None:
  b0 = sch.get_sblock(name="T_add", func_name="main")
  l1, l2 = sch.get_loops(block=b0)
  l3, l4 = sch.split(loop=l2, factors=[None, 32], preserve_unit_iters=True, disable_predication=False)
  l5, l6 = sch.split(loop=l1, factors=[4, None], preserve_unit_iters=True, disable_predication=False)
