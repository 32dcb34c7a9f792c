# from tvm import s_tir
def apply_trace(sch: s_tir.Schedule) -> None:
  b0 = sch.get_sblock(name="B", func_name="main")
  l1, l2 = sch.get_loops(block=b0)
  sch.unannotate(block_or_loop=l1, ann_key="pragma_unroll_explicit")
  sch.unannotate(block_or_loop=b0, ann_key="schedule_rule")
