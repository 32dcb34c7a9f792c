d = sch.get_block("D")
i, j = sch.get_loops(d)
sch.compute_at(sch.get_block("C"), i)
sch.compute_inline(sch.get_block("C"))
