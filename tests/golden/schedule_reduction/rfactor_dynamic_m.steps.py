c = sch.get_block("C")
i, j, k = sch.get_loops(c)
k0, k1 = sch.split(k, factors=[None, 8])
sch.rfactor(k1, 0)
