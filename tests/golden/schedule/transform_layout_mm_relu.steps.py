block_Y = sch.get_block("Y", func_name="mm_relu")
sch.transform_layout(block_Y, ("write", 0), lambda i, j: (i // 4, j, i % 4))
