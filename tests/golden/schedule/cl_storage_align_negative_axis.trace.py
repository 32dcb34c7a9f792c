# from tvm import s_tir
def apply_trace(sch: s_tir.Schedule) -> None:
  b0 = sch.get_sblock(name="B", func_name="main")
  sch.storage_align(block=b0, buffer_index=0, axis=-1, factor=32, offset=1)
