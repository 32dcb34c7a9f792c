b = sch.get_block("B")
i, = sch.get_loops(b)
sch.split(i, factors=[8, 16])
