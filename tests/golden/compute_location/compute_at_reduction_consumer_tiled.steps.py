i, k = sch.get_loops(sch.get_block("C"))
k0, k1 = sch.split(k, [None, 8])
sch.compute_at(sch.get_block("B"), k0)
