# from tvm import s_tir
def apply_trace(sch: s_tir.Schedule) -> None:
  b0 = sch.get_sblock(name="B", func_name="main")
  b1 = sch.cache_read(block=b0, read_buffer_index=0, storage_scope="shared")
  l2, l3 = sch.get_loops(block=b0)
  sch.compute_at(block=b1, loop=l2, preserve_unit_loops=False, index=-1)
  sch.transform_layout(block=b1, buffer=("write", 0), index_map=lambda i, j: (j // 32, i, j % 32,), pad_value=None, assume_injective_transform=False)
