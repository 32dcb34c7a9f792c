b = sch.get_block("B")
i, k = sch.get_loops(b)
sch.decompose_reduction(b, i)
