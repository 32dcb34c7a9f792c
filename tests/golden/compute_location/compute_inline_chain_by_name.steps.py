sch.compute_inline("C")
sch.compute_inline("B")
