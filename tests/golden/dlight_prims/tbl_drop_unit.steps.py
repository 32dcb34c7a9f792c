sch.transform_block_layout(sch.get_sblock("C"), lambda i, j: (j,))
