# from tvm import s_tir
def apply_trace(sch: s_tir.Schedule) -> None:
  b0 = sch.get_sblock(name="Y", func_name="mm_relu")
  l1, l2, l3 = sch.get_loops(block=b0)
  b4 = sch.get_sblock(name="C", func_name="mm_relu")
  sch.reverse_compute_at(block=b4, loop=l1, preserve_unit_loops=False, index=-1)
  b5, b6 = sch.get_child_blocks(l1)
  sch.annotate(block_or_loop=b6, ann_key="child_index", ann_val=1)
