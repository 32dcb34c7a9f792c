b = sch.get_block("B")
sch.reverse_compute_inline(b)
