b = sch.get_block("B")
i, j = sch.get_loops(b)
sch.split(j, factors=[8, None])
