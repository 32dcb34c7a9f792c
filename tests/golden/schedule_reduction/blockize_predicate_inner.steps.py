b = sch.get_block("B")
i, j = sch.get_loops(b)
i0, i1 = sch.split(i, factors=[None, 32])
sch.blockize(i0)
