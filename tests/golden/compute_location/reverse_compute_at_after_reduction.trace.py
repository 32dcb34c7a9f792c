# from tvm import s_tir
def apply_trace(sch: s_tir.Schedule) -> None:
  b0 = sch.get_sblock(name="Y", func_name="main")
  l1, l2, l3 = sch.get_loops(block=b0)
  b4 = sch.get_sblock(name="C", func_name="main")
  sch.reverse_compute_at(block=b4, loop=l2, preserve_unit_loops=False, index=-1)
