c = sch.get_block("C")
sch.transform_layout(c, "B", lambda i, j: (j, i))
