b = sch.get_block("T_softmax_expsum")
i0, k = sch.get_loops(b)
ko, ki = sch.split(k, factors=[None, 32])
sch.rfactor(ki, 0)
