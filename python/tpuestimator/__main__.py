import sys

from tpuestimator.cli import main

sys.exit(main())
