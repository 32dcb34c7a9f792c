block_Y = sch.get_block("Y", func_name="mm_relu")
sch.set_scope(block_Y, 0, "local")
