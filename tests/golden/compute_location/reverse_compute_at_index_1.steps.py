i, _ = sch.get_loops(sch.get_block("B"))
sch.reverse_compute_at(sch.get_block("D"), i, index=1)
for n, child in enumerate(sch.get_child_blocks(i)):
    sch.annotate(child, "child_index", n)
