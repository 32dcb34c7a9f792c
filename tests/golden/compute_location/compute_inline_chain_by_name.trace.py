# from tvm import s_tir
def apply_trace(sch: s_tir.Schedule) -> None:
  b0 = sch.get_sblock(name="C", func_name="main")
  sch.compute_inline(block=b0)
  b1 = sch.get_sblock(name="B", func_name="main")
  sch.compute_inline(block=b1)
