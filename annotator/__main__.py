import sys

from annotator.cli import main

sys.exit(main())
