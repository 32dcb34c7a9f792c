sch.reverse_compute_inline(sch.get_block("T_add", func_name="main"))
