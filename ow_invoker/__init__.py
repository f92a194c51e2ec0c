"""The ``ow-invoker`` command: every subcommand's module, seen from the top (``cli``), and the
embedded platform (``standalone``) that composes the front with an invoker."""
