b = sch.get_block("B")
sch.transform_layout(b, "B", lambda i, j: (j, i))
