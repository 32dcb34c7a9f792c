# from tvm import s_tir
def apply_trace(sch: s_tir.Schedule) -> None:
  b0 = sch.get_sblock(name="Y", func_name="mm_relu")
  b1 = sch.cache_write(block=b0, write_buffer_index=0, storage_scope="local")
  l2, l3, l4 = sch.get_loops(block=b0)
