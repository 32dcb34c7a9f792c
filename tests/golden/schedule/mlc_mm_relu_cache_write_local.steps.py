block_Y = sch.get_block("Y", func_name="mm_relu")
Y_local = sch.cache_write(block_Y, 0, "local")
i, j, k = sch.get_loops(block_Y)
