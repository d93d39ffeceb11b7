import sys

from engine.service.cli import main

sys.exit(main())
