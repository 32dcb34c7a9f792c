b = sch.get_block("B")
sch.transform_layout(b, ("write", 0), lambda i, j: (j // 16, i, j % 16))
