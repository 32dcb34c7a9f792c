i, _ = sch.get_loops(sch.get_block("C"))
sch.compute_at(sch.get_block("B"), i, index=-1)
for n, child in enumerate(sch.get_child_blocks(i)):
    sch.annotate(child, "child_index", n)
