b = sch.get_block("B")
i, j = sch.get_loops(b)
sch.reorder(j, i)
