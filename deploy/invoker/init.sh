#!/bin/sh
# The stock image's entry point: its arguments are the invoker's (--id, --uniqueName,
# --displayedName); the environment is read as the stock invoker reads it.
exec ow-invoker run "$@"
