# from tvm import s_tir
def apply_trace(sch: s_tir.Schedule) -> None:
  b0 = sch.get_sblock(name="C", func_name="main")
  l1, = sch.get_loops(block=b0)
  l2, l3 = sch.split(loop=l1, factors=[None, 32], preserve_unit_iters=True, disable_predication=False)
  b4 = sch.get_sblock(name="B", func_name="main")
  sch.compute_at(block=b4, loop=l2, preserve_unit_loops=False, index=-1)
