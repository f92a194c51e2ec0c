import sys

from invoker.cli import main

sys.exit(main())
