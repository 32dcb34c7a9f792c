c = sch.get_block("C")
i, j, k = sch.get_loops(c)
sch.decompose_reduction(c, k)
sch.decompose_reduction(c, i)
