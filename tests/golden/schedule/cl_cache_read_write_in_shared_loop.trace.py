# from tvm import s_tir
def apply_trace(sch: s_tir.Schedule) -> None:
  b0 = sch.get_sblock(name="B", func_name="main")
  b1 = sch.get_sblock(name="C", func_name="main")
  l2, = sch.get_loops(block=b1)
  sch.compute_at(block=b0, loop=l2, preserve_unit_loops=False, index=-1)
  b3 = sch.cache_read(block=b1, read_buffer_index=0, storage_scope="local")
  b4 = sch.cache_write(block=b0, write_buffer_index=0, storage_scope="shared")
