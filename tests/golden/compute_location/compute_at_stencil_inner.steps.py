c = sch.get_block("C")
i, j = sch.get_loops(c)
sch.compute_at(sch.get_block("B"), j)
