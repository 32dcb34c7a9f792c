sch.transform_block_layout(sch.get_sblock("B"), lambda i, j: (j, i))
