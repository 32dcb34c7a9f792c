normalize_prim_func(sch)
