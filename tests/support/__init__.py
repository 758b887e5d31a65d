"""What the tests share, one concept per module: realistic SDK items, the servers and their
databases, what lies in the tables and on disk, the clock, child processes, the command line,
and the stand-ins and apps some tests build on."""
