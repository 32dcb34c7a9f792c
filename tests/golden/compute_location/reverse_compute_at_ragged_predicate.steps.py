b = sch.get_block("B")
i, j = sch.get_loops(b)
i0, i1 = sch.split(i, factors=[None, 4])
sch.reverse_compute_at(sch.get_block("C"), i0)
