c = sch.get_block("C")
i, j, k = sch.get_loops(c)
sch.reorder(i, k, j)
sch.decompose_reduction(c, j)
