b = sch.get_block("B")
i, k = sch.get_loops(b)
ko, ki = sch.split(k, factors=[None, 16])
sch.rfactor(ko, 1)
