# from tvm import s_tir
def apply_trace(sch: s_tir.Schedule) -> None:
  b0 = sch.get_sblock(name="C", func_name="main")
  l1, l2, l3 = sch.get_loops(block=b0)
  b4 = sch.cache_read(block=b0, read_buffer_index=0, storage_scope="local")
  b5 = sch.cache_read(block=b0, read_buffer_index=1, storage_scope="local")
  sch.compute_at(block=b4, loop=l3, preserve_unit_loops=False, index=-1)
  sch.compute_at(block=b5, loop=l3, preserve_unit_loops=False, index=-1)
