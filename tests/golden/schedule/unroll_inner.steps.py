b = sch.get_block("B")
i, j = sch.get_loops(b)
j0, j1 = sch.split(j, factors=[None, 4])
sch.unroll(j1)
