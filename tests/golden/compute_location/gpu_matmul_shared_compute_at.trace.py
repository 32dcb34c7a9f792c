# from tvm import s_tir
def apply_trace(sch: s_tir.Schedule) -> None:
  b0 = sch.get_sblock(name="C", func_name="main")
  l1, l2, l3, l4, l5, l6, l7 = sch.get_loops(block=b0)
  b8 = sch.get_sblock(name="A_shared", func_name="main")
  sch.compute_at(block=b8, loop=l4, preserve_unit_loops=False, index=-1)
  b9 = sch.get_sblock(name="B_shared", func_name="main")
  sch.compute_at(block=b9, loop=l4, preserve_unit_loops=False, index=-1)
