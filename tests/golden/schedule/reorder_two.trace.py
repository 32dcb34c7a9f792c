# from tvm import s_tir
def apply_trace(sch: s_tir.Schedule) -> None:
  b0 = sch.get_sblock(name="B", func_name="main")
  l1, l2 = sch.get_loops(block=b0)
  sch.reorder(l2, l1)
