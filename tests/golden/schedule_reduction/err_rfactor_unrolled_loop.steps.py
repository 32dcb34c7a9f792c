b = sch.get_block("B")
i, k = sch.get_loops(b)
sch.unroll(k)
sch.rfactor(k, 0)
