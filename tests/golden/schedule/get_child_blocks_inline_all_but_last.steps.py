root = sch.get_block("root")
blocks = sch.get_child_blocks(root)
for b in blocks[:-1]:
    sch.compute_inline(b)
