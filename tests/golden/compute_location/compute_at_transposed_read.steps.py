i, j = sch.get_loops(sch.get_block("C"))
j0, j1 = sch.split(j, [None, 8])
sch.compute_at(sch.get_block("B"), j0)
