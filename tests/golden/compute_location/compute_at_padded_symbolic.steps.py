i, = sch.get_loops(sch.get_block("C"))
i0, i1 = sch.split(i, [None, 32])
sch.compute_at(sch.get_block("B"), i0)
