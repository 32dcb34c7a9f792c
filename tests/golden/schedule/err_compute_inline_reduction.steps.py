block_Y = sch.get_block("Y", func_name="mm_relu")
sch.compute_inline(block_Y)
