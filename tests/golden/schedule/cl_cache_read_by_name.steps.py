sch.cache_read("C", "A", "local")
