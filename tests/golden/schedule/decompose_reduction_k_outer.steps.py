c = sch.get_block("C")
i, j, k = sch.get_loops(c)
sch.reorder(k, i, j)
sch.decompose_reduction(c, k)
