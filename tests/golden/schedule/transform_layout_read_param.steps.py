b = sch.get_block("B")
sch.transform_layout(b, ("read", 0), lambda i, j: (i // 16, j // 16, i % 16, j % 16))
