block_C = sch.get_block("C")
i0, j0, tx, k0, k1, i2, j2 = sch.get_loops(block_C)
sch.compute_at(sch.get_block("A_shared"), k0)
sch.compute_at(sch.get_block("B_shared"), k0)
