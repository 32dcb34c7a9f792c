# from tvm import s_tir
def apply_trace(sch: s_tir.Schedule) -> None:
  b0 = sch.get_sblock(name="root", func_name="main")
  b1, b2, b3, b4 = sch.get_child_blocks(b0)
  sch.compute_inline(block=b1)
  sch.compute_inline(block=b2)
  sch.compute_inline(block=b3)
