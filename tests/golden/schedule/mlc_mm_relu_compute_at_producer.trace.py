# from tvm import s_tir
def apply_trace(sch: s_tir.Schedule) -> None:
  b0 = sch.get_sblock(name="Y", func_name="mm_relu")
  b1 = sch.get_sblock(name="C", func_name="mm_relu")
  l2, l3 = sch.get_loops(block=b1)
  sch.compute_at(block=b0, loop=l3, preserve_unit_loops=False, index=-1)
