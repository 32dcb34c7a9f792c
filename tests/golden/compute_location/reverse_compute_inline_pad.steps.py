sch.reverse_compute_inline(sch.get_block("C"))
