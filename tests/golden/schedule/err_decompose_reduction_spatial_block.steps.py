b = sch.get_block("B")
i, j = sch.get_loops(b)
sch.decompose_reduction(b, i)
