y = sch.get_block("Y")
i, j, k = sch.get_loops(y)
sch.reverse_compute_at(sch.get_block("C"), j)
