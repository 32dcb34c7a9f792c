c = sch.get_block("C")
i, j = sch.get_loops(c)
i0, i1 = sch.split(i, factors=[None, 8])
sch.compute_at(sch.get_block("B"), i0)
