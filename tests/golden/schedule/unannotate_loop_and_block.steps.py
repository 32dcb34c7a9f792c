b = sch.get_block("B")
i, j = sch.get_loops(b)
sch.unannotate(i, "pragma_unroll_explicit")
sch.unannotate(b, "schedule_rule")
