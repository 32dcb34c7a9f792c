# from tvm import s_tir
def apply_trace(sch: s_tir.Schedule) -> None:
  b0 = sch.get_sblock(name="D", func_name="main")
  b1, = sch.get_producers(block=b0)
  sch.compute_inline(block=b1)
  b2, = sch.get_producers(block=b0)
  sch.compute_inline(block=b2)
