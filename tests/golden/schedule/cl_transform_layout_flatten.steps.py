b = sch.get_block("B")
sch.transform_layout(b, ("write", 0), lambda i, j: (i * 128 + j,))
