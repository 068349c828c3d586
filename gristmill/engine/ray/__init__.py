"""The Ray executor (``executor.RayExecutor``): shard tasks, resolve pieces and tokenize shards as Ray tasks;
the stage loop is the local engine's. Registered in ``engine.executor.EXECUTORS`` as ``ray``.

Importing this package does not import Ray; creating the executor does, and fails in one line without it."""
