i, j = sch.get_loops(sch.get_block("C"))
i0, i1 = sch.split(i, [None, 3])
sch.compute_at(sch.get_block("B"), i1, preserve_unit_loops=True)
