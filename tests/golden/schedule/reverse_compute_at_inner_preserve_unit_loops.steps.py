b = sch.get_block("B")
c = sch.get_block("C")
i, j = sch.get_loops(b)
sch.reverse_compute_at(c, j, preserve_unit_loops=True)
