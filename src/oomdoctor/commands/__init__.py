"""One module per verb: ``register(parser)`` adds its arguments, ``run(args) -> int`` does the work.

Keep module-level imports light (stdlib and oomdoctor core only); import heavy things inside ``run``.
"""
