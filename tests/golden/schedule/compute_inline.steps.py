b = sch.get_block("B")
sch.compute_inline(b)
