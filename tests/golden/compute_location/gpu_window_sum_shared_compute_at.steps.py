block_C = sch.get_block("C")
i0, i1 = sch.get_loops(block_C)
sch.compute_at(sch.get_block("A_shared"), i1)
