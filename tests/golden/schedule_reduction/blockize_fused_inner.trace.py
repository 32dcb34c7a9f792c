# from tvm import s_tir
def apply_trace(sch: s_tir.Schedule) -> None:
  b0 = sch.get_sblock(name="B", func_name="main")
  l1, l2 = sch.get_loops(block=b0)
  l3 = sch.fuse(l1, l2, preserve_unit_iters=True)
  l4, l5 = sch.split(loop=l3, factors=[None, 128], preserve_unit_iters=True, disable_predication=False)
  b6 = sch.blockize(target=l5, preserve_unit_iters=True)
