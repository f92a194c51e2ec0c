import sys

from ow_invoker.cli import main

sys.exit(main())
