# from tvm import s_tir
def apply_trace(sch: s_tir.Schedule) -> None:
  b0 = sch.get_sblock(name="B", func_name="main")
  l1, l2 = sch.get_loops(block=b0)
  b3 = sch.get_sblock(name="D", func_name="main")
  sch.reverse_compute_at(block=b3, loop=l1, preserve_unit_loops=False, index=-2)
  b4, b5, b6 = sch.get_child_blocks(l1)
  sch.annotate(block_or_loop=b4, ann_key="child_index", ann_val=0)
  sch.annotate(block_or_loop=b5, ann_key="child_index", ann_val=1)
  sch.annotate(block_or_loop=b6, ann_key="child_index", ann_val=2)
