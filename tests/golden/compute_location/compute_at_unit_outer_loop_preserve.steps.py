i, j = sch.get_loops(sch.get_block("C"))
sch.compute_at(sch.get_block("B"), j, preserve_unit_loops=True)
