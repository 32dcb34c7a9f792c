# from tvm import s_tir
def apply_trace(sch: s_tir.Schedule) -> None:
  b0 = sch.get_sblock(name="B", func_name="main")
  l1, l2 = sch.get_loops(block=b0)
  sch.annotate(block_or_loop=l1, ann_key="pragma_auto_unroll_max_step", ann_val=16)
  sch.annotate(block_or_loop=l2, ann_key="pragma_unroll_explicit", ann_val=1)
  sch.annotate(block_or_loop=b0, ann_key="meta_schedule.tiling_structure", ann_val="SSRSRS")
  sch.annotate(block_or_loop=b0, ann_key="some_float", ann_val=0.5)
