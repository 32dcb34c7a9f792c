b = sch.get_block("B")
c = sch.get_block("C")
i, j = sch.get_loops(c)
sch.compute_at(b, j)
