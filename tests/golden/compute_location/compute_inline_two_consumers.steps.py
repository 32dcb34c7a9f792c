sch.compute_inline(sch.get_block("B"))
