b = sch.get_block("B")
sch.transform_layout(b, ("write", 0), lambda i, j: (i // 4, j, i % 4 + 1))
