# from tvm import s_tir
def apply_trace(sch: s_tir.Schedule) -> None:
  b0 = sch.get_sblock(name="C", func_name="main")
  l1, l2 = sch.get_loops(block=b0)
  b3 = sch.get_sblock(name="B", func_name="main")
  sch.compute_at(block=b3, loop=l2, preserve_unit_loops=False, index=-1)
