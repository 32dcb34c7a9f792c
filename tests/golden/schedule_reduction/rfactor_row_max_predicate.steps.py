b = sch.get_block("B")
i, k = sch.get_loops(b)
ko, ki = sch.split(k, factors=[None, 8])
sch.rfactor(ki, 0)
