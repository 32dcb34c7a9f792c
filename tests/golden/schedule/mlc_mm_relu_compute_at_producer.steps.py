block_Y = sch.get_block("Y", func_name="mm_relu")
block_C = sch.get_block("C", func_name="mm_relu")
i, j = sch.get_loops(block_C)
sch.compute_at(block_Y, j)
