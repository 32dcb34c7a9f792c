i, _ = sch.get_loops(sch.get_block("B"))
sch.reverse_compute_at(sch.get_block("D"), i, index=0)
