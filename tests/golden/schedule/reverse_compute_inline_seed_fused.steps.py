relu = sch.get_block("compute", func_name="main")
sch.reverse_compute_inline(relu)
