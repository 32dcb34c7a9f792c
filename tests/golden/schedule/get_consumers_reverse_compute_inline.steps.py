b = sch.get_block("B")
(c,) = sch.get_consumers(b)
sch.reverse_compute_inline(c)
