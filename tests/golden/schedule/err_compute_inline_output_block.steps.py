c = sch.get_block("C")
sch.compute_inline(c)
