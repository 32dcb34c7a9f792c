i, j = sch.get_loops(sch.get_block("B2"))
sch.reverse_compute_at(sch.get_block("C"), i)
