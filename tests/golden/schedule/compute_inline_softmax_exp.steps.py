sch.compute_inline(sch.get_block("T_softmax_exp"))
