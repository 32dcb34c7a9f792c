b = sch.get_block("B")
c = sch.get_block("C")
i, j = sch.get_loops(b)
sch.compute_at(c, i)
