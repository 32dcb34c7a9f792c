b = sch.get_block("C")
i, j, k = sch.get_loops(b)
sch.reorder(k, i, j)
